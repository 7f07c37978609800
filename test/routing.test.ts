import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "../src/lib/errors";
import { DISPLAY_NAME_PATTERN } from "../src/schemas/common";
import { auth, call, expectError, issueKey } from "./helpers";

// The closed list the issue names; quota and idempotency codes join it in later issues.
const REQUIRED_CODES = [
  "unauthorized",
  "invalid_request",
  "not_found",
  "method_not_allowed",
  "unsupported_media_type",
  "payload_too_large",
  "endpoint_removed",
  "internal_error",
  "service_unavailable",
];

/** Every error: JSON content type and exactly {code, message, status}, the code from the closed list. */
async function expectErrorShape(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
  const body = (await res.clone().json()) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(["code", "message", "status"]);
  expect(ERROR_CODES).toContain(body.code);
  expect(typeof body.message).toBe("string");
  expect((body.message as string).length).toBeGreaterThan(0);
  return expectError(res, status, code);
}

describe("404 and 405", () => {
  it.each([
    "/index.html",
    "/pets",
    "/v2/pets",
    "/v1x/pets",
    "/admin/x",
    "/favicon.ico",
    "/docs/extra",
  ])("%s → 404 without a key", async (path) => {
    await expectErrorShape(await call(path), 404, "not_found");
  });

  it.each(["/v1", "/v1/", "/v1/dogs", "/v1/pets/1/owner", "/v1/pets/1/2"])(
    "%s → 401 without a key, 404 with one",
    async (path) => {
      await expectErrorShape(await call(path), 401, "unauthorized");
      const { key } = await issueKey();
      await expectErrorShape(await call(path, { headers: auth(key) }), 404, "not_found");
    },
  );

  it.each([
    ["DELETE", "/v1/pets", ["GET", "POST"]],
    ["PUT", "/v1/pets", ["GET", "POST"]],
    ["PATCH", "/v1/pets", ["GET", "POST"]],
    ["PUT", "/v1/pets/1", ["GET"]],
    ["DELETE", "/v1/pets/1", ["GET"]],
    ["POST", "/v1/pets/1", ["GET"]],
  ])("%s %s with a key → 405 with Allow", async (method, path, allowed) => {
    const { key } = await issueKey();
    const res = await call(path, {
      method,
      headers: auth(key, { "Content-Type": "application/json" }),
      body: method === "DELETE" ? undefined : "{}",
    });
    const allow = (res.headers.get("Allow") ?? "").split(",").map((m) => m.trim());
    for (const m of allowed) expect(allow).toContain(m);
    expect(allow).not.toContain(method);
    await expectErrorShape(res, 405, "method_not_allowed");
  });

  it("405 comes after authentication", async () => {
    await expectErrorShape(await call("/v1/pets", { method: "DELETE" }), 401, "unauthorized");
  });

  it("the errors of every layer share the shape", async () => {
    const { key } = await issueKey();
    await expectErrorShape(
      await call("/v1/pets?limit=0", { headers: auth(key) }),
      400,
      "invalid_request",
    );
    await expectErrorShape(
      await call("/v1/pets", { method: "POST", headers: auth(key), body: "x" }),
      415,
      "unsupported_media_type",
    );
    await expectErrorShape(
      await call("/v1/pets", {
        method: "POST",
        headers: auth(key, { "Content-Type": "application/json" }),
        body: "x".repeat(20_000),
      }),
      413,
      "payload_too_large",
    );
    await expectErrorShape(
      await call("/v1/pets", {
        method: "POST",
        headers: auth(key, { "Content-Type": "application/json" }),
        body: "{",
      }),
      400,
      "invalid_request",
    );
    await expectErrorShape(
      await call("/v1/pets/999999999", { headers: auth(key) }),
      404,
      "not_found",
    );
    await expectErrorShape(await call("/admin/v1/keys"), 401, "unauthorized");
  });
});
describe("contract documentation", () => {
  type Doc = {
    openapi: string;
    paths: Record<
      string,
      Record<
        string,
        {
          operationId: string;
          deprecated?: boolean;
          security?: unknown[];
          parameters?: Array<{ name: string; in: string; schema: Record<string, unknown> }>;
          responses: Record<string, unknown>;
          requestBody?: unknown;
        }
      >
    >;
    components: {
      securitySchemes: Record<string, { type: string; scheme?: string }>;
      schemas: Record<
        string,
        { properties?: Record<string, Record<string, unknown>>; required?: string[] }
      >;
    };
  };

  async function doc(): Promise<Doc> {
    const res = await call("/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
    return (await res.json()) as Doc;
  }

  function operations(d: Doc) {
    return Object.fromEntries(
      Object.values(d.paths)
        .flatMap((p) => Object.values(p))
        .map((op) => [op.operationId, op]),
    );
  }

  it("documents conditional requests, the D1 bookmark and the headers every response carries", async () => {
    const ops = operations(await doc());
    for (const id of ["listPets", "createPet", "getPet"]) {
      const op = ops[id]!;
      expect(op.parameters?.map((p) => p.name)).toContain("x-d1-bookmark");
      const headers = (r: string) =>
        Object.keys(((op.responses[r] ?? {}) as { headers?: object }).headers ?? {});
      for (const status of Object.keys(op.responses))
        expect(headers(status), `${id} ${status}`).toEqual(
          expect.arrayContaining(["X-Request-Id", "Server-Timing"]),
        );
      if (id === "createPet") {
        expect(headers("201")).toEqual(
          expect.arrayContaining(["Location", "Idempotent-Replayed", "X-RateLimit-Remaining"]),
        );
        expect(op.responses["304"]).toBeUndefined();
      } else {
        expect(op.parameters?.map((p) => p.name)).toContain("If-None-Match");
        expect(headers("200")).toContain("ETag");
        expect(headers("304")).toEqual(expect.arrayContaining(["ETag", "X-RateLimit-Remaining"]));
      }
    }
    for (const status of ["200", "404", "410", "429"]) {
      expect(Object.keys((ops.getPet!.responses[status] as { headers: object }).headers)).toEqual(
        expect.arrayContaining(["Deprecation", "Sunset", "Link"]),
      );
    }
  });

  it("is public OpenAPI 3.1 with the three operations; getPet is deprecated", async () => {
    const d = await doc();
    expect(d.openapi).toMatch(/^3\.1\./);
    const ops = operations(d);
    expect(Object.keys(ops)).toEqual(expect.arrayContaining(["listPets", "createPet", "getPet"]));
    expect(ops.getPet!.deprecated).toBe(true);
    expect(ops.listPets!.deprecated).not.toBe(true);
    expect(ops.createPet!.deprecated).not.toBe(true);
  });

  it("documents bearer security on every operation", async () => {
    const d = await doc();
    const schemes = Object.entries(d.components.securitySchemes).filter(
      ([, s]) => s.type === "http" && s.scheme?.toLowerCase() === "bearer",
    );
    expect(schemes.length).toBeGreaterThan(0);
    const names = schemes.map(([n]) => n);
    for (const id of ["listPets", "createPet", "getPet"]) {
      const security = operations(d)[id]!.security as Array<Record<string, unknown>>;
      expect(security.some((s) => Object.keys(s).some((k) => names.includes(k)))).toBe(true);
    }
  });

  it("documents every response status and the Error schema with the closed code list", async () => {
    const d = await doc();
    const ops = operations(d);
    const expected: Record<string, string[]> = {
      listPets: ["200", "400", "401"],
      createPet: ["201", "400", "401", "413", "415"],
      getPet: ["200", "400", "401", "404", "410"],
    };
    for (const [id, statuses] of Object.entries(expected))
      expect(Object.keys(ops[id]!.responses)).toEqual(expect.arrayContaining(statuses));
    const error = d.components.schemas.Error!;
    expect(error.required).toEqual(expect.arrayContaining(["code", "message", "status"]));
    expect(error.properties!.code!.enum).toEqual(expect.arrayContaining(REQUIRED_CODES));
  });

  it("documents the limits on every field", async () => {
    const d = await doc();
    const ops = operations(d);
    const limit = ops.listPets!.parameters!.find((p) => p.name === "limit" && p.in === "query")!;
    expect(limit.schema).toMatchObject({ minimum: 1, maximum: 100, default: 20 });
    const status = ops.listPets!.parameters!.find((p) => p.name === "status")!;
    expect(
      JSON.stringify(status.schema) + JSON.stringify(d.components.schemas.PetStatus ?? {}),
    ).toContain("pending");
    const petId = ops.getPet!.parameters!.find((p) => p.name === "petId" && p.in === "path")!;
    expect(petId.schema).toMatchObject({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
    const newPet = d.components.schemas.NewPet!;
    // 1–200 characters once trimmed: the pattern holds the length (a maxLength would count the
    // whitespace around the name too).
    expect(newPet.properties!.name).toMatchObject({ minLength: 1, pattern: DISPLAY_NAME_PATTERN });
    expect(DISPLAY_NAME_PATTERN).toContain("{0,198}");
    expect(newPet.properties!.categoryId).toMatchObject({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
    });
    expect(newPet.required).toEqual(expect.arrayContaining(["name", "categoryId"]));
    expect(newPet.required ?? []).not.toContain("status");
    expect(JSON.stringify(newPet.properties!.status)).toContain("available");
  });

  it("GET / is a small public page pointing at /docs, the OpenAPI document and each console view; it loads only the console's icon and styles", async () => {
    const res = await call("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
    expect(res.headers.get("Content-Security-Policy")).toMatch(
      /^default-src 'none'; img-src 'self'; style-src 'self';/,
    );
    const html = await res.text();
    const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]);
    expect(links).toEqual([
      "/admin/favicon.svg",
      "/admin/console.css",
      "/docs",
      "/v1/openapi.json",
      "/admin/keys",
      "/admin/usage",
      "/admin/audit",
      "/admin/webhooks",
      "/admin/docs",
    ]);
    expect(html).not.toMatch(/<script|<style|\sstyle=|<img/i);
    expect(html.match(/<link /g)).toEqual(["<link ", "<link "]);
    expect((await call("/", { method: "POST" })).status).toBe(405);
  });

  it("GET /docs is a public HTML API reference pointing at the document", async () => {
    const res = await call("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html.toLowerCase()).toContain("<html");
    expect(html).toContain("/v1/openapi.json");
  });

  it.each([
    ["/docs", "/v1/openapi.json", "bearerAuth"],
    ["/admin/docs", "/admin/v1/openapi.json", "adminToken"],
  ])("GET %s (no credential) names %s and preselects %s", async (page, document, scheme) => {
    const res = await call(page);
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain(`data-document="${document}"`);
    expect(html).toContain(`data-security-scheme="${scheme}"`);
    // The scheme the page preselects is the one the document's operations require.
    const doc = (await (await call(document)).json()) as {
      components: { securitySchemes: Record<string, unknown> };
    };
    expect(Object.keys(doc.components.securitySchemes)).toEqual([scheme]);
    expect((await call(page, { method: "POST" })).status).toBe(405);
  });

  it.each(["/docs", "/admin/docs"])(
    "GET %s loads only same-origin scripts, under a CSP that allows nothing else",
    async (page) => {
      const res = await call(page);
      const csp = res.headers.get("Content-Security-Policy") ?? "";
      const directives = Object.fromEntries(
        csp.split(";").map((d) => {
          const [name, ...values] = d.trim().split(/\s+/);
          return [name, values];
        }),
      );
      expect(directives["default-src"]).toEqual(["'none'"]);
      expect(directives["script-src"]).toEqual(["'self'"]);
      expect(directives["connect-src"]).toEqual(["'self'"]);
      expect(directives["frame-ancestors"]).toEqual(["'none'"]);
      expect(csp).not.toMatch(/https?:|unsafe-eval|\*/);
      expect(res.headers.get("X-Content-Type-Options")).toBe("nosniff");
      const html = await res.text();
      expect(html).not.toMatch(/https?:\/\//); // no third-party URL at all
      const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
      expect(scripts.map(([, attrs]) => attrs!.trim())).toEqual([
        'src="/docs/scalar.js"',
        'src="/docs/init.js"',
      ]);
      expect(scripts.every(([, , body]) => body === "")).toBe(true); // nothing inline
    },
  );
});
