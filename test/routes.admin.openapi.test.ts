// GET /admin/v1/openapi.json: the operator API, documented from the same zod schemas.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "../src/lib/errors";
import { call } from "./helpers";

type Doc = {
  openapi: string;
  servers: Array<{ url: string }>;
  tags: Array<{ name: string; description: string }>;
  paths: Record<
    string,
    Record<
      string,
      {
        operationId: string;
        tags?: string[];
        summary?: string;
        description?: string;
        security?: unknown[];
        responses: Record<string, { content?: Record<string, unknown> }>;
      }
    >
  >;
  components: {
    schemas: Record<string, { properties?: Record<string, unknown> }>;
    securitySchemes: Record<string, unknown>;
  };
};

describe("GET /admin/v1/openapi.json", () => {
  it("is served without a token, as OpenAPI 3.1 JSON, with an ETag", async () => {
    const res = await call("/admin/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
    expect(res.headers.get("ETag")).toBeTruthy();
    const doc = (await res.json()) as Doc;
    expect(doc.openapi).toBe("3.1.0");
    // Like the public document's: this environment's PUBLIC_ORIGIN, relative while it is "".
    expect(doc.servers[0]!.url).toBe(`${env.PUBLIC_ORIGIN}/admin/v1`);
  });

  it("documents every admin operation, each behind the admin token", async () => {
    const doc = (await (await call("/admin/v1/openapi.json")).json()) as Doc;
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(
        ([method, op]) => `${method.toUpperCase()} ${path} ${op.operationId}`,
      ),
    );
    // HEAD wherever GET works, OPTIONS (the 405 of every method a path lacks) on every path, and
    // the document itself.
    const heads = operations.filter((o) => o.startsWith("HEAD "));
    expect(heads.sort()).toEqual(
      operations
        .filter((o) => o.startsWith("GET "))
        .map((o) => `HEAD ${o.slice(4)}Head`)
        .sort(),
    );
    expect(operations.filter((o) => o.startsWith("OPTIONS ")).map((o) => o.split(" ")[1])).toEqual(
      Object.keys(doc.paths),
    );
    const documentOps = [
      "GET /openapi.json getOpenApiDocument",
      "HEAD /openapi.json getOpenApiDocumentHead",
    ];
    expect(operations).toEqual(expect.arrayContaining(documentOps));
    expect(
      operations
        .filter(
          (o) => !o.startsWith("HEAD ") && !o.startsWith("OPTIONS ") && !documentOps.includes(o),
        )
        .sort(),
    ).toEqual(
      [
        "GET /audit listAudit",
        "GET /keys listKeys",
        "GET /keys/{id} getKey",
        "GET /keys/{id}/usage getKeyUsage",
        "GET /usage listUsageOfDay",
        "GET /whoami whoAmI",
        "PATCH /keys/{id} updateKey",
        "DELETE /keys/{id} revokeKey",
        "POST /keys createKey",
        "POST /keys/{id}/roll rollKey",
        "POST /keys/{id}/unban unbanKey",
        "GET /webhooks listWebhookEndpoints",
        "POST /webhooks createWebhookEndpoint",
        "GET /webhooks/{id} getWebhookEndpoint",
        "PATCH /webhooks/{id} updateWebhookEndpoint",
        "DELETE /webhooks/{id} deleteWebhookEndpoint",
        "POST /webhooks/{id}/roll-secret rollWebhookSecret",
        "POST /webhooks/{id}/test sendWebhookTestEvent",
        "GET /webhooks/{id}/deliveries listWebhookDeliveries",
        "POST /webhooks/{id}/deliveries/{deliveryId}/resend resendWebhookDelivery",
      ].sort(),
    );
    for (const [path, methods] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(methods)) {
        // The document is public; asking it for any other method is not.
        const isDocument = path === "/openapi.json" && method !== "options";
        expect(op.security).toEqual(isDocument ? [] : [{ adminToken: [] }]);
        expect(op.summary).toBeTruthy();
        expect(op.description).toBeTruthy();
        expect(op.tags).toHaveLength(1);
        expect(doc.tags.map((t) => t.name)).toContain(op.tags![0]);
        expect(op.responses["401"] !== undefined).toBe(!isDocument);
      }
    expect(doc.components.securitySchemes.adminToken).toMatchObject({
      type: "http",
      scheme: "bearer",
    });
  });

  it("describes the new fields, the usage CSV and the closed error code list", async () => {
    const doc = (await (await call("/admin/v1/openapi.json")).json()) as Doc;
    const { schemas } = doc.components;
    expect(Object.keys(schemas.Key!.properties!)).toEqual(
      expect.arrayContaining([
        "ownerId",
        "meta",
        "disabledAt",
        "rolledAt",
        "previousSecretExpiresAt",
      ]),
    );
    expect(Object.keys(schemas.UpdateKey!.properties!)).toEqual(
      expect.arrayContaining(["enabled", "expiresAt", "ownerId", "meta"]),
    );
    expect(schemas.RollKey!.properties!.gracePeriodSeconds).toMatchObject({
      minimum: 0,
      maximum: 604_800,
      default: 86_400,
    });
    expect(Object.keys(doc.paths["/keys/{id}/usage"]!.get!.responses["200"]!.content!)).toEqual([
      "application/json",
      "text/csv",
    ]);
    expect(schemas.Error!.properties!.code).toMatchObject({ enum: ERROR_CODES });
  });

  it("is separate from the public document, which has no admin paths", async () => {
    const publicDoc = (await (await call("/v1/openapi.json")).json()) as Doc;
    expect(
      Object.keys(publicDoc.paths).some((p) => p.includes("keys") || p.includes("audit")),
    ).toBe(false);
  });
});

describe("the admin document's error responses say which headers each really carries", () => {
  type Responses = Record<string, { headers?: Record<string, unknown> }>;
  /** The responses of every operation that needs the admin token (all but the document's). */
  const responsesOf = async () => {
    const doc = (await (await call("/admin/v1/openapi.json")).json()) as {
      paths: Record<string, Record<string, { security: unknown[]; responses: Responses }>>;
    };
    return Object.values(doc.paths).flatMap((methods) =>
      Object.values(methods)
        .filter((op) => op.security.length > 0)
        .map((op) => op.responses),
    );
  };

  it("rate-limit headers only on 401 and 429 (the failed-token window), Retry-After on 429 and 503", async () => {
    for (const responses of await responsesOf()) {
      expect(Object.keys(responses)).toContain("429");
      for (const [status, response] of Object.entries(responses)) {
        const names = Object.keys(response.headers ?? {});
        const rateLimited = status === "401" || status === "429";
        expect(names.includes("X-RateLimit-Limit"), `${status} X-RateLimit-Limit`).toBe(
          rateLimited,
        );
        expect(names.includes("Retry-After"), `${status} Retry-After`).toBe(
          status === "429" || status === "503",
        );
      }
    }
  });

  it("as the API answers: a wrong token's 401 has them, a missing key's 404 has none", async () => {
    const wrong = await call("/admin/v1/keys", { headers: { Authorization: "Bearer not-it" } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("X-RateLimit-Limit")).not.toBeNull();
    const missing = await call("/admin/v1/keys/key_doesnotexist00000000", {
      headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` },
    });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("X-RateLimit-Limit")).toBeNull();
  });
});
