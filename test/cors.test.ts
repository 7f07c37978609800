import { describe, expect, it } from "vitest";
import { ADMIN, auth, callWith, issueKey } from "./helpers";

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
