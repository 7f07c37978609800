import { afterEach, describe, expect, it, vi } from "vitest";
import { auth, call, issueKey, postJson } from "./helpers";

afterEach(() => vi.restoreAllMocks());

const listOf = (header: string | null) =>
  (header ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

describe("X-Request-Id on every response", () => {
  it("is on every response, success or error, and differs between requests", async () => {
    const { key } = await issueKey();
    const ids = [];
    for (const res of [
      await call("/v1/pets", { headers: auth(key) }),
      await call("/nowhere"),
      await call("/v1/pets"),
      await call("/v1/openapi.json"),
    ]) {
      const id = res.headers.get("X-Request-Id");
      expect(id).toMatch(/^[\w\-=]{8,}$/);
      ids.push(id);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("echoes a sane client-supplied id and replaces an unsafe one", async () => {
    const { key } = await issueKey();
    const sane = await call("/v1/pets", {
      headers: auth(key, { "X-Request-Id": "client-abc_123" }),
    });
    expect(sane.headers.get("X-Request-Id")).toBe("client-abc_123");
    for (const bad of ["has space", "x".repeat(300), "<script>"]) {
      const res = await call("/v1/pets", { headers: auth(key, { "X-Request-Id": bad }) });
      const id = res.headers.get("X-Request-Id");
      expect(id).toBeTruthy();
      expect(id).not.toBe(bad);
    }
  });
});

describe("X-Request-Id", () => {
  it("a UUID when absent; a sane client id echoed; an insane one replaced; cf-ray used when present", async () => {
    const { key } = await issueKey();
    const get = (headers: Record<string, string>) =>
      call("/v1/pets", { headers: auth(key, headers) }).then((r) => r.headers.get("X-Request-Id"));
    expect(await get({})).toMatch(UUID);
    expect(await get({ "X-Request-Id": "client-abc_123=" })).toBe("client-abc_123=");
    expect(await get({ "X-Request-Id": "a".repeat(255) })).toBe("a".repeat(255));
    for (const insane of ["has spaces", "a".repeat(256), "semi;colon", "new\\nline"])
      expect(await get({ "X-Request-Id": insane })).toMatch(UUID);
    expect(await get({ "cf-ray": "8f1e2d3c4b5a6978-AMS" })).toBe("8f1e2d3c4b5a6978-AMS");
    expect(await get({ "cf-ray": "8f1e2d3c4b5a6978-AMS", "X-Request-Id": "has spaces" })).toBe(
      "8f1e2d3c4b5a6978-AMS",
    );
    // A CF-Ray that is not a ray id (only possible off Cloudflare) is not echoed.
    expect(await get({ "cf-ray": "<script>", "X-Request-Id": "has spaces" })).toMatch(UUID);
  });
});

describe("Server-Timing", () => {
  const entries = (res: Response) =>
    listOf(res.headers.get("Server-Timing")).map((e) => e.split(";")[0]!.trim());

  it("has auth, quota and db on a list, auth and quota (no db) on a 404", async () => {
    const { key } = await issueKey();
    const list = await call("/v1/pets", { headers: auth(key) });
    expect(list.status).toBe(200);
    expect(entries(list)).toEqual(expect.arrayContaining(["auth", "quota", "db"]));
    const created = await postJson("/v1/pets", { name: "Timed", categoryId: 1 }, auth(key));
    expect(entries(created)).toEqual(expect.arrayContaining(["auth", "quota", "db"]));
    const missing = await call("/v1/nowhere", { headers: auth(key) });
    expect(missing.status).toBe(404);
    expect(entries(missing)).toEqual(expect.arrayContaining(["auth", "quota"]));
    expect(entries(missing)).not.toContain("db");
  });
});
