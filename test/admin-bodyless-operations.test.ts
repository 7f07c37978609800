// The operator API's operations that take no body (revoke, unban, delete an endpoint, send a
// delivery again, send a test event) take none, or an empty JSON object `{}` (what some clients
// send with every POST). Anything else is refused rather than ignored, so a caller who expects
// the body to choose something (the type of a test event, a revocation's reason) learns that it
// does not: fields are a 400 naming them and nothing is done; a body that is not JSON is the
// usual 415; malformed JSON a 400.
import { describe, expect, it } from "vitest";
import { ADMIN, call, expectError, issueKey, postJson } from "./helpers";

/** A new webhook endpoint's id. */
async function newEndpoint(): Promise<string> {
  const res = await postJson(
    "/admin/v1/webhooks",
    { url: "https://hooks.example.com/bodyless", eventTypes: ["key.revoked"] },
    ADMIN,
  );
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

async function deliveryCount(endpointId: string): Promise<number> {
  const res = await call(`/admin/v1/webhooks/${endpointId}/deliveries?limit=100`, {
    headers: ADMIN,
  });
  return ((await res.json()) as { data: unknown[] }).data.length;
}

async function keyStatus(id: string): Promise<string> {
  const res = await call(`/admin/v1/keys/${id}`, { headers: ADMIN });
  return ((await res.json()) as { status: string }).status;
}

/** Each operation: a fresh target, the call, its success status and what it did. */
interface Operation {
  method: string;
  /**
   * A fresh target: the operation's path and, where it shows, whether the operation was done
   * (an unban of a key that is not banned, or a resend, leaves nothing to see).
   */
  target: () => Promise<{ path: string; done?: () => Promise<boolean> }>;
  ok: number;
}

const OPERATIONS: Record<string, Operation> = {
  revokeKey: {
    method: "DELETE",
    ok: 200,
    target: async () => {
      const { id } = await issueKey("free");
      return {
        path: `/admin/v1/keys/${id}`,
        done: async () => (await keyStatus(id)) === "revoked",
      };
    },
  },
  unbanKey: {
    method: "POST",
    ok: 200,
    target: async () => {
      const { id } = await issueKey("free");
      return { path: `/admin/v1/keys/${id}/unban` };
    },
  },
  deleteWebhookEndpoint: {
    method: "DELETE",
    ok: 204,
    target: async () => {
      const id = await newEndpoint();
      return {
        path: `/admin/v1/webhooks/${id}`,
        done: async () =>
          (await call(`/admin/v1/webhooks/${id}`, { headers: ADMIN })).status === 404,
      };
    },
  },
  sendWebhookTestEvent: {
    method: "POST",
    ok: 202,
    target: async () => {
      const id = await newEndpoint();
      return {
        path: `/admin/v1/webhooks/${id}/test`,
        done: async () => (await deliveryCount(id)) > 0,
      };
    },
  },
  resendWebhookDelivery: {
    method: "POST",
    ok: 202,
    target: async () => {
      const id = await newEndpoint();
      const test = await call(`/admin/v1/webhooks/${id}/test`, { method: "POST", headers: ADMIN });
      const delivery = ((await test.json()) as { id: string }).id;
      return { path: `/admin/v1/webhooks/${id}/deliveries/${delivery}/resend` };
    },
  },
};

const send = (op: Operation, path: string, headers: Record<string, string>, body?: string) =>
  call(path, { method: op.method, headers: { ...ADMIN, ...headers }, body });

describe.each(Object.entries(OPERATIONS))("%s takes no body", (_name, op) => {
  it.each([
    ["no body", {}, undefined],
    ["no body, with a JSON Content-Type", { "Content-Type": "application/json" }, undefined],
    ["an empty body of another type", { "Content-Type": "text/plain" }, ""],
    ["an empty JSON object", { "Content-Type": "application/json" }, "{ }"],
  ] as const)("%s → done", async (_, headers, body) => {
    const { path, done } = await op.target();
    const res = await send(op, path, headers, body);
    expect(res.status, await res.clone().text()).toBe(op.ok);
    if (done) expect(await done()).toBe(true);
  });

  it("a JSON object with fields → 400 naming them, nothing done", async () => {
    const { path, done } = await op.target();
    const res = await send(
      op,
      path,
      { "Content-Type": "application/json" },
      '{"eventType":"key.revoked","reason":"x"}',
    );
    expect((await expectError(res, 400, "invalid_request")).message).toBe(
      "unknown fields: eventType, reason (this operation takes no body, or {})",
    );
    if (done) expect(await done()).toBe(false);
  });

  it.each([
    ["an array", "[]"],
    ["null", "null"],
    ["malformed JSON", "{"],
  ])("%s → 400, nothing done", async (_, body) => {
    const { path, done } = await op.target();
    const res = await send(op, path, { "Content-Type": "application/json" }, body);
    expect((await expectError(res, 400, "invalid_request")).message).toMatch(
      /^body: must be absent or an empty JSON object/,
    );
    if (done) expect(await done()).toBe(false);
  });

  it("a body that is not JSON → 415 with the usual message, nothing done", async () => {
    const { path, done } = await op.target();
    const res = await send(op, path, { "Content-Type": "text/plain" }, "hello");
    expect((await expectError(res, 415, "unsupported_media_type")).message).toBe(
      'The body must be uncompressed UTF-8 JSON sent with Content-Type: application/json (got Content-Type: "text/plain").',
    );
    if (done) expect(await done()).toBe(false);
  });
});
