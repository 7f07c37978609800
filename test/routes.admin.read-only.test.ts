// Read-only admin tokens (ADMIN_READ_TOKENS): every operation that reads answers as for a full
// token; every write answers 403 forbidden and changes nothing; the admin document says so.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { mayUseMethod } from "../src/auth/admin-token";
import { ADMIN, call, callWith, expectError, issueKey, keyDetail, mockClock, T0 } from "./helpers";

mockClock(T0);

const VIEWER = { Authorization: `Bearer ${env.ADMIN_READ_TOKENS.split(":")[1]}` };

type Operation = { operationId: string; responses: Record<string, unknown> };
type Doc = { paths: Record<string, Record<string, Operation>> };

/** Every operation of the admin document as [method, path template, operation]. */
async function operations(): Promise<Array<[string, string, Operation]>> {
  const doc = (await (await call("/admin/v1/openapi.json")).json()) as Doc;
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]): [string, string, Operation] => [
      method.toUpperCase(),
      path,
      op,
    ]),
  );
}

describe("mayUseMethod", () => {
  it("full access may use every method; read access only GET and HEAD", () => {
    for (const method of ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"])
      expect(mayUseMethod("full", method), method).toBe(true);
    expect(mayUseMethod("read", "GET")).toBe(true);
    expect(mayUseMethod("read", "HEAD")).toBe(true);
    for (const method of ["POST", "PATCH", "PUT", "DELETE", "OPTIONS"])
      expect(mayUseMethod("read", method), method).toBe(false);
  });
});

describe("a read-only admin token", () => {
  it("GET /whoami names the token and its access", async () => {
    const viewer = await call("/admin/v1/whoami", { headers: VIEWER });
    expect(viewer.status).toBe(200);
    expect(await viewer.json()).toEqual({ name: "viewer", access: "read" });
    const admin = await call("/admin/v1/whoami", { headers: ADMIN });
    expect(await admin.json()).toEqual({ name: "admin", access: "full" });
  });

  it("reads: key list, key detail, usage history, one day's usage and the audit trail", async () => {
    const key = await issueKey("pro");
    for (const path of [
      "/admin/v1/keys?limit=5",
      `/admin/v1/keys/${key.id}`,
      `/admin/v1/keys/${key.id}/usage`,
      `/admin/v1/usage?day=${new Date(T0).toISOString().slice(0, 10)}`,
      `/admin/v1/audit?keyId=${key.id}`,
    ]) {
      const res = await call(path, { headers: VIEWER });
      expect(res.status, `${path}: ${await res.clone().text()}`).toBe(200);
    }
  });

  it("every documented write answers 403 forbidden, and the key and its audit trail stay as they were", async () => {
    const key = await issueKey("pro");
    const before = await (await keyDetail(key.id)).json();
    const auditBefore = await (
      await call(`/admin/v1/audit?keyId=${key.id}`, { headers: ADMIN })
    ).json();
    // OPTIONS (a 405 for any token) is refused to a read-only token too, but writes nothing.
    const writes = (await operations()).filter(
      ([method]) => !["GET", "HEAD", "OPTIONS"].includes(method),
    );
    expect(writes.map(([, , op]) => op.operationId).sort()).toEqual(
      [
        "createKey",
        "revokeKey",
        "rollKey",
        "unbanKey",
        "updateKey",
        "createWebhookEndpoint",
        "updateWebhookEndpoint",
        "deleteWebhookEndpoint",
        "rollWebhookSecret",
        "sendWebhookTestEvent",
        "resendWebhookDelivery",
      ].sort(),
    );
    for (const [method, path] of writes) {
      const res = await call(`/admin/v1${path.replace("{id}", key.id)}`, {
        method,
        headers: { ...VIEWER, "Content-Type": "application/json" },
        // A body each write would accept from a full-access token.
        body: method === "DELETE" ? undefined : JSON.stringify(bodyFor(path, method)),
      });
      const body = await expectError(res, 403, "forbidden");
      expect(body.message).toContain('"viewer" is read-only');
    }
    expect(await (await keyDetail(key.id)).json()).toEqual(before);
    expect(
      await (await call(`/admin/v1/audit?keyId=${key.id}`, { headers: ADMIN })).json(),
    ).toEqual(auditBefore);
  });

  it("the admin document lists 403 on exactly the operations a read-only token may not use", async () => {
    for (const [method, path, op] of await operations())
      expect("403" in op.responses, `${method} ${path}`).toBe(!["GET", "HEAD"].includes(method));
  });
});

function bodyFor(path: string, method: string): unknown {
  if (path === "/keys") return { name: "not-made", plan: "free" };
  if (path.endsWith("/roll")) return { gracePeriodSeconds: 0 };
  if (method === "PATCH") return { name: "not-renamed" };
  return {};
}

describe("ADMIN_READ_TOKENS settings", () => {
  it.each([
    ["a name of ADMIN_TOKENS", { ADMIN_READ_TOKENS: "alice:long-enough-read-token-1" }],
    ["the name of ADMIN_TOKEN", { ADMIN_READ_TOKENS: "admin:long-enough-read-token-2" }],
    ["the token of a full-access one", { ADMIN_READ_TOKENS: "bob:test-alice-admin-token" }],
    ["a short token", { ADMIN_READ_TOKENS: "bob:short" }],
    ["read-only tokens only", { ADMIN_TOKEN: "", ADMIN_TOKENS: "" }],
  ])("%s → every admin request answers 500", async (_label, bindings) => {
    const res = await callWith(bindings, "/admin/v1/keys", { headers: VIEWER });
    await expectError(res, 500, "internal_error");
  });
});
