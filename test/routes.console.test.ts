// The operator console as the Worker serves it: one page under a strict CSP. Its script, styles and
// icon are static assets (public/admin/); e2e/console.browser.test.mjs checks how they are served.
// The page is rendered at build time and read by the Worker from among the static assets.
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import script from "../public/admin/console.js?raw";
import { renderConsolePage } from "../src/routes/console/page";
import { BASE, call } from "./helpers";

describe("operator console pages", () => {
  it("/admin is public and carries the strict CSP", async () => {
    const res = await call("/admin");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
    const csp = res.headers.get("Content-Security-Policy") ?? "";
    expect(csp).toMatch(/^default-src 'self'/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get("X-Content-Type-Options")).toBe("nosniff");
  });

  it("the page has no inline script or style and loads nothing from another origin", async () => {
    const html = await (await call("/admin")).text();
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBe(1);
    for (const [, attributes, body] of scripts) {
      expect(attributes).toContain('src="/admin/console.js"');
      expect(body).toBe("");
    }
    expect(html).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=/i);
    const urls = [...html.matchAll(/\s(?:src|href|action)="([^"]*)"/g)].map((m) => m[1]);
    expect(urls.length).toBeGreaterThan(0);
    // Its own files and views, and the home page: all of this origin.
    for (const url of urls) expect(url).toMatch(/^\/$|^\/admin\//);
  });

  it.each([
    "/admin",
    "/admin/keys",
    "/admin/keys?plan=pro&state=active",
    "/admin/keys/new",
    "/admin/keys/key_0123456789abcdefABCD",
    "/admin/usage?day=2030-06-10",
    "/admin/audit?actor=system",
    "/admin/webhooks",
    "/admin/webhooks?ownerId=acct_42",
    "/admin/webhooks/new",
    "/admin/webhooks/whe_0123456789abcdefABCD",
  ])("%s is a view of its own: the console's page, under its CSP", async (path) => {
    const res = await call(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Security-Policy")).toMatch(/^default-src 'self'/);
    expect(await res.text()).toBe(await (await call("/admin")).text());
  });

  it("the page served is, byte for byte, the one page.tsx renders", async () => {
    const res = await call("/admin");
    expect(res.headers.get("Content-Type")).toBe("text/html; charset=UTF-8");
    expect(await res.text()).toBe(renderConsolePage());
  });

  it("the page's file among the static assets is the Worker's only", async () => {
    expect((await env.ASSETS.fetch(new URL("/admin/console-page", BASE))).status).toBe(200);
    for (const path of ["/admin/console-page", "/admin/console-page.html"])
      expect((await call(path)).status).toBe(404);
  });

  it("a page the build did not write is a 500 Error body, and the next request reads again", async () => {
    // A fresh module, whose isolate has not read the page yet.
    vi.resetModules();
    const { createApp } = await import("../src/app");
    const app = createApp();
    const missing = {
      fetch: async () => new Response("not found", { status: 404 }),
    } as unknown as Fetcher;
    const served = (assets: Fetcher) =>
      app.fetch(new Request(`${BASE}/admin`), { ...env, ASSETS: assets }, createExecutionContext());
    const errors: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => errors.push(line));
    const failed = await served(missing);
    // Logged as what it is: the build did not write the page.
    expect(errors.join("\n")).toContain("/admin/console-page answered 404");
    expect(failed.status).toBe(500);
    expect(await failed.json()).toMatchObject({ code: "internal_error", status: 500 });
    const res = await served(env.ASSETS);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(renderConsolePage());
  });

  it("the page links each view from its navigation", async () => {
    const html = await (await call("/admin")).text();
    const nav = /<nav class="nav"[^>]*>([\s\S]*?)<\/nav>/.exec(html)?.[1] ?? "";
    expect([...nav.matchAll(/href="([^"]+)"/g)].map((m) => m[1])).toEqual([
      "/admin/keys",
      "/admin/usage",
      "/admin/audit",
      "/admin/webhooks",
    ]);
  });

  it.each([
    "/admin/keys/not-a-key-id",
    "/admin/keys/key_short",
    "/admin/keys/new/more",
    "/admin/webhooks/key_0123456789abcdefABCD",
    "/admin/webhooks/whe_short",
    "/admin/webhooks/new/more",
  ])("%s names no view: 404", async (path) => {
    expect((await call(path)).status).toBe(404);
  });

  it.each(["/admin/console.js", "/admin/console.css", "/admin/favicon.svg"])(
    "%s is not in the Worker (a static asset, outside its bundle)",
    async (path) => {
      expect((await call(path)).status).toBe(404);
    },
  );

  it("the script keeps the token in sessionStorage, never in a cookie or URL, and never writes HTML", () => {
    expect(script).toContain("sessionStorage");
    expect(script).not.toMatch(
      /document\.cookie|localStorage|innerHTML|outerHTML|insertAdjacentHTML|eval\(/,
    );
    // The one URL in it is the SVG namespace, a name rather than an address.
    expect(script.replaceAll("http://www.w3.org/2000/svg", "")).not.toMatch(/https?:\/\//);
  });

  it("the admin API under /admin/v1 still needs the token", async () => {
    expect((await call("/admin/v1/keys")).status).toBe(401);
    expect((await call("/admin/elsewhere")).status).toBe(404);
  });
});
