// The OpenAPI documents are generated at build time and served from templates among the static
// assets (src/routes/openapi-served.ts): what the Worker serves must be, byte for byte, what the
// generator makes of the zod schemas for the environment's settings.
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import { etagOfText } from "../src/lib/etag";
import { adminApi } from "../src/routes/admin/routes";
import { adminOpenApiDocument, openApiDocument } from "../src/routes/openapi-document";
import {
  fillTemplate,
  type OriginKind,
  TEMPLATE_CONFIG,
  templateConfigOf,
} from "../src/routes/openapi-served";
import { petsApi } from "../src/routes/pets/routes";
import { ownUsageApi } from "../src/routes/usage/routes";
import { BASE, callWith } from "./helpers";

/** The documents as the generator makes them, in this isolate, from the schemas in src/. */
const generated = {
  "/v1/openapi.json": openApiDocument(petsApi, ownUsageApi),
  "/admin/v1/openapi.json": adminOpenApiDocument(adminApi),
};
const DOCUMENTS = Object.keys(generated) as (keyof typeof generated)[];

describe("the served OpenAPI documents are the generated ones", () => {
  const settings = [
    { ENVIRONMENT: env.ENVIRONMENT, PUBLIC_ORIGIN: env.PUBLIC_ORIGIN },
    { ENVIRONMENT: "production", PUBLIC_ORIGIN: "" },
    { ENVIRONMENT: "staging", PUBLIC_ORIGIN: "https://staging.example.com:8443" },
  ];
  it.each(DOCUMENTS.flatMap((path) => settings.map((config) => ({ path, ...config }))))(
    "$path for ENVIRONMENT $ENVIRONMENT, PUBLIC_ORIGIN '$PUBLIC_ORIGIN'",
    async ({ path, ENVIRONMENT, PUBLIC_ORIGIN }) => {
      const res = await callWith({ ENVIRONMENT, PUBLIC_ORIGIN }, path);
      expect(res.status).toBe(200);
      const { text, etag } = generated[path]({ ENVIRONMENT, PUBLIC_ORIGIN });
      expect(await res.text()).toBe(text);
      expect(res.headers.get("ETag")).toBe(etag);
      // The stand-ins never reach a reader.
      expect(text).not.toContain(TEMPLATE_CONFIG.ENVIRONMENT);
      expect(text).not.toContain(TEMPLATE_CONFIG.PUBLIC_ORIGIN);
    },
  );

  // The generator only interpolates the settings: filling a template in gives its text for any
  // value, even one JSON escapes or String.replace would read as a pattern.
  const odd = [
    { ENVIRONMENT: 'a "quoted" \\ env $& $1', PUBLIC_ORIGIN: "" },
    { ENVIRONMENT: "x", PUBLIC_ORIGIN: 'https://o.example/"$$\\\u2028' },
  ];
  it.each(DOCUMENTS.flatMap((path) => odd.map((config) => ({ path, ...config }))))(
    "filling $path's template in equals generating it: ENVIRONMENT '$ENVIRONMENT'",
    ({ path, ENVIRONMENT, PUBLIC_ORIGIN }) => {
      const kind: OriginKind = PUBLIC_ORIGIN ? "absolute" : "relative";
      const template = generated[path](templateConfigOf(kind)).text;
      expect(fillTemplate(template, { ENVIRONMENT, PUBLIC_ORIGIN })).toBe(
        generated[path]({ ENVIRONMENT, PUBLIC_ORIGIN }).text,
      );
    },
  );
});

describe("reading a template", () => {
  it("a template the build did not write is a 500 Error body, and the next request reads again", async () => {
    const app = createApp();
    const missing = {
      fetch: async () => new Response("not found", { status: 404 }),
    } as unknown as Fetcher;
    const served = (assets: Fetcher) =>
      app.fetch(
        new Request(`${BASE}/v1/openapi.json`),
        { ...env, ASSETS: assets },
        createExecutionContext(),
      );
    const errors: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => errors.push(line));
    const failed = await served(missing);
    // Logged as what it is: the build did not write the template.
    expect(errors.join("\n")).toContain("/v1/openapi-templates/public.absolute.json answered 404");
    expect(failed.status).toBe(500);
    expect(await failed.json()).toMatchObject({ code: "internal_error", status: 500 });
    const res = await served(env.ASSETS);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(res.headers.get("ETag")).toBe(etagOfText(text));
    expect(text).toBe(
      generated["/v1/openapi.json"]({
        ENVIRONMENT: env.ENVIRONMENT,
        PUBLIC_ORIGIN: env.PUBLIC_ORIGIN,
      }).text,
    );
  });
});
