import { describe, expect, it } from "vitest";
import { ADMIN, auth, brokenDb, call, callWith, fixClock, issueKey, postJson, T0 } from "./helpers";

const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** The headers every API answer carries, whatever its status; `cache` is its Cache-Control. */
function expectApiHeaders(res: Response, cache: "private, no-cache" | "no-store", what: string) {
  expect(res.headers.get("Cache-Control"), `${what}: Cache-Control`).toBe(cache);
  expect(res.headers.get("X-Content-Type-Options"), `${what}: nosniff`).toBe("nosniff");
  expect(res.headers.get("Content-Security-Policy"), `${what}: CSP`).toBe(API_CSP);
  const vary = (res.headers.get("Vary") ?? "").split(",").map((t) => t.trim().toLowerCase());
  expect(vary, `${what}: Vary`).toContain("authorization");
}

describe("API response headers: caching and browser hardening on every kind of answer", () => {
  it("200 list, 304 revalidation, 201 create, 200 get, HEAD", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "Headers", categoryId: 1 }, auth(key));
    expect(created.status).toBe(201);
    expectApiHeaders(created, "no-store", "201 create");
    const { id } = (await created.json()) as { id: number };

    const list = await call("/v1/pets", { headers: auth(key) });
    expect(list.status).toBe(200);
    expectApiHeaders(list, "private, no-cache", "200 list");

    const etag = list.headers.get("ETag")!;
    const revalidated = await call("/v1/pets", { headers: auth(key, { "If-None-Match": etag }) });
    expect(revalidated.status).toBe(304);
    expectApiHeaders(revalidated, "private, no-cache", "304");

    const one = await call(`/v1/pets/${id}`, { headers: auth(key) });
    expect(one.status).toBe(200);
    expectApiHeaders(one, "private, no-cache", "200 get");

    const head = await call("/v1/pets", { method: "HEAD", headers: auth(key) });
    expect(head.status).toBe(200);
    expectApiHeaders(head, "private, no-cache", "HEAD");
  });

  it("400, 401, 404 (in /v1, outside, under the console's pages), 405, 413, 415", async () => {
    const { key } = await issueKey();
    const cases: Array<[string, Promise<Response>, number]> = [
      ["400", call("/v1/pets?limit=0", { headers: auth(key) }), 400],
      ["401", call("/v1/pets"), 401],
      ["404 /v1", call("/v1/nope", { headers: auth(key) }), 404],
      ["404 outside", call("/nope"), 404],
      ["404 under the console", call("/admin/nope"), 404],
      // A console page's route that names no page answers the API's 404, with the API's headers.
      ["404 a console key page's path", call("/admin/keys/nope"), 404],
      ["404 a console webhook page's path", call("/admin/webhooks/whe_nope"), 404],
      ["405 a console page's path", call("/admin/keys", { method: "POST" }), 405],
      ["405", call("/v1/pets", { method: "DELETE", headers: auth(key) }), 405],
      ["413", postJson("/v1/pets", { name: "x".repeat(20_000), categoryId: 1 }, auth(key)), 413],
      ["415", call("/v1/pets", { method: "POST", headers: auth(key), body: "x" }), 415],
    ];
    for (const [what, pending, status] of cases) {
      const res = await pending;
      expect(res.status, what).toBe(status);
      expectApiHeaders(res, "no-store", what);
    }
  });

  it("429 over the limit", async () => {
    fixClock(T0);
    const { key } = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    const refused = await call("/v1/pets", { headers: auth(key) });
    expect(refused.status).toBe(429);
    expectApiHeaders(refused, "no-store", "429");
  });

  it("500 (misconfigured) and 503 (D1 down)", async () => {
    const misconfigured = await callWith({ ENVIRONMENT: "nowhere" }, "/v1/pets");
    expect(misconfigured.status).toBe(500);
    expectApiHeaders(misconfigured, "no-store", "500");

    const { key } = await issueKey();
    const down = await callWith({ DB: brokenDb() }, "/v1/pets", { headers: auth(key) });
    expect(down.status).toBe(503);
    expectApiHeaders(down, "no-store", "503");
  });

  it("the OpenAPI document (200 and 304)", async () => {
    const doc = await call("/v1/openapi.json");
    expect(doc.status).toBe(200);
    expectApiHeaders(doc, "private, no-cache", "openapi.json");
    const again = await call("/v1/openapi.json", {
      headers: { "If-None-Match": doc.headers.get("ETag")! },
    });
    expect(again.status).toBe(304);
    expectApiHeaders(again, "private, no-cache", "openapi.json 304");
  });

  it("the operator API is never stored, even its successful reads (a new key's secret is in a 201)", async () => {
    const created = await postJson("/admin/v1/keys", { name: "h", plan: "free" }, ADMIN);
    expect(created.status).toBe(201);
    expectApiHeaders(created, "no-store", "admin 201");
    const list = await call("/admin/v1/keys", { headers: ADMIN });
    expect(list.status).toBe(200);
    expectApiHeaders(list, "no-store", "admin 200");
    const denied = await call("/admin/v1/keys");
    expect(denied.status).toBe(401);
    expectApiHeaders(denied, "no-store", "admin 401");
  });

  it("keeps CORS's Vary: Origin alongside Vary: Authorization", async () => {
    const { key } = await issueKey();
    const res = await callWith({ CORS_ORIGINS: "https://app.example" }, "/v1/pets", {
      headers: auth(key, { Origin: "https://app.example" }),
    });
    expect(res.status).toBe(200);
    const vary = (res.headers.get("Vary") ?? "").split(",").map((t) => t.trim().toLowerCase());
    expect(vary).toEqual(expect.arrayContaining(["origin", "authorization"]));
  });

  it("leaves the /docs page's own headers alone (an API CSP would blank the page)", async () => {
    const docs = await call("/docs");
    expect(docs.status).toBe(200);
    expect(docs.headers.get("Content-Type")).toMatch(/^text\/html/);
    expect(docs.headers.get("Content-Security-Policy")).not.toBe(API_CSP);
  });
});
