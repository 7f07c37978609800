import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN, auth, call, callWith, issueKey } from "./helpers";

const ALLOWED = "https://app.example";
const withCors = (path: string, init: RequestInit = {}) =>
  callWith({ CORS_ORIGINS: ALLOWED }, path, init);

const preflight = (method: string, origin = ALLOWED) => ({
  method: "OPTIONS",
  headers: {
    Origin: origin,
    "Access-Control-Request-Method": method,
    "Access-Control-Request-Headers": "authorization, content-type",
  },
});

const CORS_GRANTS = [
  "Access-Control-Allow-Origin",
  "Access-Control-Allow-Methods",
  "Access-Control-Allow-Headers",
  "Access-Control-Expose-Headers",
];

function expectNoGrant(res: Response, what: string) {
  expect(res.status, what).not.toBe(204);
  expect(res.status, what).toBeGreaterThanOrEqual(400);
  expect(res.status, what).toBeLessThan(500);
  for (const h of CORS_GRANTS) expect(res.headers.get(h), `${what}: ${h}`).toBeNull();
}

describe("CORS covers only the public /v1 routes that exist", () => {
  it("preflights for each public route and its own methods → 204 with the route's methods", async () => {
    const cases: Array<[string, string, string[]]> = [
      ["/v1/pets", "POST", ["GET", "HEAD", "POST"]],
      ["/v1/pets", "GET", ["GET", "HEAD", "POST"]],
      ["/v1/pets/7", "GET", ["GET", "HEAD"]],
      ["/v1/openapi.json", "GET", ["GET", "HEAD"]],
    ];
    for (const [path, method, methods] of cases) {
      const res = await withCors(path, preflight(method));
      expect(res.status, `${method} ${path}`).toBe(204);
      expect(res.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
      expect(res.headers.get("Access-Control-Allow-Methods")).toBe(methods.join(", "));
    }
  });

  it("the operator API never answers a cross-origin preflight, for any of its paths or methods", async () => {
    for (const [path, method] of [
      ["/admin/v1/keys", "POST"],
      ["/admin/v1/keys", "GET"],
      ["/admin/v1/keys/key_x", "DELETE"],
      ["/admin/v1/keys/key_x", "PATCH"],
      ["/admin/v1/keys/key_x/unban", "POST"],
    ] as const) {
      expectNoGrant(await withCors(path, preflight(method)), `preflight ${method} ${path}`);
    }
  });

  it("the operator API's answers carry no CORS grant even for an allowed origin", async () => {
    const res = await withCors("/admin/v1/keys", { headers: { ...ADMIN, Origin: ALLOWED } });
    expect(res.status).toBe(200);
    for (const h of CORS_GRANTS) expect(res.headers.get(h), h).toBeNull();
    expect(res.headers.get("Timing-Allow-Origin")).toBeNull();
  });

  it("OPTIONS to unknown paths, or for a method the route does not have, gets no 204", async () => {
    for (const [path, method] of [
      ["/nope", "GET"],
      ["/v1/nope", "GET"],
      ["/v1/pets/7/extra", "GET"],
      ["/docs", "GET"],
      ["/v1/pets/7", "POST"],
      ["/v1/pets", "DELETE"],
      ["/v1/openapi.json", "POST"],
    ] as const) {
      expectNoGrant(await withCors(path, preflight(method)), `preflight ${method} ${path}`);
    }
  });

  it("an OPTIONS that is not a preflight (no Origin, or no requested method) gets no 204", async () => {
    const { key } = await issueKey();
    const plain = await withCors("/v1/pets", { method: "OPTIONS", headers: auth(key) });
    expect(plain.status).toBe(405);
    expect(plain.headers.get("Allow")).toMatch(/GET/);
    const noMethod = await withCors("/v1/pets", {
      method: "OPTIONS",
      headers: { Origin: ALLOWED },
    });
    expectNoGrant(noMethod, "OPTIONS with Origin only");
  });

  it("a preflight from a disallowed origin gets no 204 and no grant", async () => {
    expectNoGrant(
      await withCors("/v1/pets", preflight("POST", "https://evil.example")),
      "evil origin",
    );
  });

  it("Server-Timing is readable cross-origin only by allowed origins on public routes (no Timing-Allow-Origin: *)", async () => {
    const { key } = await issueKey();
    const allowed = await withCors("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) });
    expect(allowed.headers.get("Timing-Allow-Origin")).toBe(ALLOWED);
    const other = await withCors("/v1/pets", {
      headers: auth(key, { Origin: "https://evil.example" }),
    });
    expect(other.headers.get("Timing-Allow-Origin")).toBeNull();
    const sameOrigin = await withCors("/v1/pets", { headers: auth(key) });
    expect(sameOrigin.headers.get("Timing-Allow-Origin")).toBeNull();
  });
});

const withCorsFrom = (path: string, init: RequestInit = {}, origins = ALLOWED) =>
  callWith({ CORS_ORIGINS: origins }, path, init);

const preflightFrom = (origin: string, method = "POST") => ({
  method: "OPTIONS",
  headers: {
    Origin: origin,
    "Access-Control-Request-Method": method,
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key, x-d1-bookmark",
  },
});

const listOf = (header: string | null) =>
  (header ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);

describe("CORS", () => {
  it("a preflight from an allowed origin → 204 with ACAO, needing no key", async () => {
    const res = await withCorsFrom("/v1/pets", preflightFrom(ALLOWED));
    expect(res.status).toBe(204);
    expect(res.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
    expect(listOf(res.headers.get("Access-Control-Allow-Methods"))).toEqual(
      expect.arrayContaining(["get", "post"]),
    );
    expect(listOf(res.headers.get("Access-Control-Allow-Headers"))).toEqual(
      expect.arrayContaining(["authorization", "content-type", "idempotency-key", "x-d1-bookmark"]),
    );
    expect(res.headers.get("WWW-Authenticate")).toBeNull();
  });

  it("several configured origins are each allowed", async () => {
    const origins = "https://a.example, https://b.example";
    for (const origin of ["https://a.example", "https://b.example"]) {
      expect(
        (await withCorsFrom("/v1/pets", preflightFrom(origin), origins)).headers.get(
          "Access-Control-Allow-Origin",
        ),
      ).toBe(origin);
    }
  });

  it("a disallowed origin gets no Access-Control-Allow-Origin", async () => {
    const { key } = await issueKey();
    for (const origin of [
      "https://evil.example",
      "https://app.example.evil.example",
      "http://app.example",
      "null",
    ]) {
      expect(
        (await withCorsFrom("/v1/pets", preflightFrom(origin))).headers.get(
          "Access-Control-Allow-Origin",
        ),
      ).toBeNull();
      const res = await withCorsFrom("/v1/pets", { headers: auth(key, { Origin: origin }) });
      expect(res.status).toBe(200);
      expect(res.headers.get("Access-Control-Allow-Origin")).toBeNull();
    }
  });

  it("exposes the quota, paging, creation, deprecation and tracing headers to the allowed origin, errors included", async () => {
    const { key } = await issueKey();
    const ok = await withCorsFrom("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
    const exposed = listOf(ok.headers.get("Access-Control-Expose-Headers"));
    for (const h of [
      "X-RateLimit-Limit",
      "X-RateLimit-Remaining",
      "X-RateLimit-Reset",
      "Retry-After",
      "Link",
      "Location",
      "Deprecation",
      "Sunset",
      "Idempotent-Replayed",
      "X-Request-Id",
      "x-d1-bookmark",
    ]) {
      expect(exposed).toContain(h.toLowerCase());
    }
    // A browser can read the error too.
    const unauthorized = await withCorsFrom("/v1/pets", { headers: { Origin: ALLOWED } });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
  });

  it("no CORS headers at all when CORS_ORIGINS is empty (the default)", async () => {
    const { key } = await issueKey();
    expect(env.CORS_ORIGINS ?? "").toBe("");
    for (const origins of ["", "  "]) {
      for (const res of [
        await withCorsFrom("/v1/pets", preflightFrom(ALLOWED), origins),
        await withCorsFrom("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) }, origins),
      ]) {
        for (const h of [
          "Access-Control-Allow-Origin",
          "Access-Control-Allow-Methods",
          "Access-Control-Expose-Headers",
        ])
          expect(res.headers.get(h), `${JSON.stringify(origins)} ${h}`).toBeNull();
      }
    }
    const viaWorker = await call("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) });
    expect(viaWorker.headers.get("Access-Control-Allow-Origin")).toBeNull();
  });
});
