// Webhook signing secrets are sealed at rest (AES-256-GCM under WEBHOOK_ENCRYPTION_KEY): D1 holds
// no secret as issued; endpoints stored before sealing keep signing and the hourly pass seals
// them; a rotation of the key (WEBHOOK_ENCRYPTION_KEY_PREVIOUS) loses no endpoint.
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { getEndpoint, insertEndpoint } from "../src/db/webhooks";
import { configOrThrow, webhookSecretBoxOrThrow } from "../src/lib/config";
import {
  openSecretOrThrow,
  SEALED_PREFIX,
  sealSecret,
  secretBoxOf,
} from "../src/lib/sealed-secret";
import type { WebhookMessage } from "../src/lib/webhook-events";
import { newWebhookSecret, verifyWebhook } from "../src/lib/webhook-signature";
import { consumeWebhookBatch } from "../src/routes/webhooks/consumer";
import { sealStoredSecrets } from "../src/routes/webhooks/seal-secrets";
import { ADMIN, callWith, expectError, postJson } from "./helpers";
import { insertTestDelivery, receiveDeliveries } from "./webhook-fixtures";

const received = receiveDeliveries();

const NEW_KEY = "bmV3LXdlYmhvb2stZW5jcnlwdGlvbi1rZXktMDAwMDA=";

/** The endpoint's secret columns as D1 holds them. */
const storedRow = (id: string) =>
  env.DB.prepare("SELECT secret, previous_secret FROM webhook_endpoints WHERE id = ?1")
    .bind(id)
    .first<{ secret: string; previous_secret: string | null }>();

async function register(): Promise<{ id: string; secret: string }> {
  const res = await postJson(
    "/admin/v1/webhooks",
    { url: "https://hooks.example.com/sealed", eventTypes: ["key.banned"] },
    ADMIN,
  );
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; secret: string };
}

/** An endpoint as the release before sealing stored it: its secrets as issued. */
async function plaintextEndpoint(secret: string, previousSecret: string | null = null) {
  const id = `whe_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
  const now = Date.now();
  await insertEndpoint(
    env.DB,
    {
      id,
      ownerId: null,
      url: "https://hooks.example.com/plain",
      eventTypes: ["key.banned"],
      description: null,
      secret,
      previousSecret,
      previousSecretExpiresAt: previousSecret ? now + 3_600_000 : null,
      secretRolledAt: previousSecret ? now : null,
      disabledAt: null,
      disabledReason: null,
      createdAt: now,
      updatedAt: now,
      version: 1,
    },
    {
      at: now,
      actor: "admin",
      action: "webhook_create",
      keyId: id,
      changes: {},
      requestId: crypto.randomUUID(),
      clientRequestId: null,
    },
  );
  return id;
}

/** Attempts one delivery to `endpointId` through the consumer (with `bindings` swapped in). */
async function deliverTo(endpointId: string, bindings: Partial<Record<keyof Env, unknown>> = {}) {
  const id = await insertTestDelivery(endpointId);
  const batch = createMessageBatch<WebhookMessage>("animal-store-webhooks", [
    { id: "m0", timestamp: new Date(), attempts: 1, body: { kind: "delivery", deliveryId: id } },
  ]);
  await consumeWebhookBatch(batch, { ...env, ...bindings } as Env);
  return getQueueResult(batch, createExecutionContext());
}

const now = () => Math.floor(Date.now() / 1000);

describe("signing secrets at rest", () => {
  it("a registered or rolled secret is stored sealed, for its endpoint only; the answer shows it once", async () => {
    const e = await register();
    const row = await storedRow(e.id);
    expect(row!.secret.startsWith(SEALED_PREFIX)).toBe(true);
    expect(row!.secret).not.toContain(e.secret.slice(6));
    const box = await webhookSecretBoxOrThrow(configOrThrow(env));
    expect(await openSecretOrThrow(box, e.id, row!.secret)).toBe(e.secret);
    // Sealed for this endpoint: moved to another row, it does not open.
    await expect(openSecretOrThrow(box, `whe_${"x".repeat(20)}`, row!.secret)).rejects.toThrow();

    const rolled = await postJson(
      `/admin/v1/webhooks/${e.id}/roll-secret`,
      { gracePeriodSeconds: 600 },
      ADMIN,
    );
    const { secret } = (await rolled.json()) as { secret: string };
    const after = await storedRow(e.id);
    expect(after!.secret.startsWith(SEALED_PREFIX)).toBe(true);
    expect(after!.previous_secret).toBe(row!.secret);
    expect(JSON.stringify(after)).not.toContain(secret.slice(6));
    expect(await openSecretOrThrow(box, e.id, after!.secret)).toBe(secret);
    // Deliveries are signed with both, opened.
    await deliverTo(e.id);
    expect(await verifyWebhook(secret, received[0]!.headers, received[0]!.body, now())).toBe(true);
    expect(await verifyWebhook(e.secret, received[0]!.headers, received[0]!.body, now())).toBe(
      true,
    );
  });

  it("an altered sealed secret does not open", async () => {
    const box = await secretBoxOf(Uint8Array.fromBase64(NEW_KEY));
    const sealed = await sealSecret(box, "whe_a", "whsec_x");
    const flipped = `${sealed.slice(0, -2)}${sealed.at(-2) === "A" ? "B" : "A"}${sealed.at(-1)}`;
    await expect(openSecretOrThrow(box, "whe_a", flipped)).rejects.toThrow();
    expect(await openSecretOrThrow(box, "whe_a", sealed)).toBe("whsec_x");
  });

  it("an endpoint stored before sealing keeps signing; the hourly pass seals it, the same secrets", async () => {
    const [secret, previous] = [newWebhookSecret(), newWebhookSecret()];
    const id = await plaintextEndpoint(secret, previous);
    await deliverTo(id);
    expect(await verifyWebhook(secret, received[0]!.headers, received[0]!.body, now())).toBe(true);
    expect(await verifyWebhook(previous, received[0]!.headers, received[0]!.body, now())).toBe(
      true,
    );

    expect(await sealStoredSecrets(env)).toBeGreaterThanOrEqual(1);
    const row = await storedRow(id);
    for (const value of [row!.secret, row!.previous_secret!]) {
      expect(value.startsWith(SEALED_PREFIX)).toBe(true);
      expect(value).not.toContain(secret.slice(6));
      expect(value).not.toContain(previous.slice(6));
    }
    const box = await webhookSecretBoxOrThrow(configOrThrow(env));
    expect(await openSecretOrThrow(box, id, row!.secret)).toBe(secret);
    expect(await openSecretOrThrow(box, id, row!.previous_secret!)).toBe(previous);
    // Done once: the next pass finds nothing, and the endpoint's version is unchanged.
    expect(await sealStoredSecrets(env)).toBe(0);
    expect((await getEndpoint(env.DB, id))!.version).toBe(1);
    await deliverTo(id);
    expect(await verifyWebhook(secret, received[1]!.headers, received[1]!.body, now())).toBe(true);
  });

  it("rotating WEBHOOK_ENCRYPTION_KEY: the previous key still opens, the pass seals under the new one", async () => {
    const e = await register();
    const sealedBefore = (await storedRow(e.id))!.secret;
    const rotated = {
      WEBHOOK_ENCRYPTION_KEY: NEW_KEY,
      WEBHOOK_ENCRYPTION_KEY_PREVIOUS: env.WEBHOOK_ENCRYPTION_KEY,
    };
    await deliverTo(e.id, rotated);
    expect(await verifyWebhook(e.secret, received[0]!.headers, received[0]!.body, now())).toBe(
      true,
    );
    expect(await sealStoredSecrets({ ...env, ...rotated })).toBeGreaterThanOrEqual(1);
    const resealed = (await storedRow(e.id))!.secret;
    expect(resealed).not.toBe(sealedBefore);
    const newBox = await secretBoxOf(Uint8Array.fromBase64(NEW_KEY));
    expect(await openSecretOrThrow(newBox, e.id, resealed)).toBe(e.secret);
    // After the rotation (the old key removed) it still signs.
    await deliverTo(e.id, { WEBHOOK_ENCRYPTION_KEY: NEW_KEY });
    expect(await verifyWebhook(e.secret, received[1]!.headers, received[1]!.body, now())).toBe(
      true,
    );
  });

  it("a secret sealed under a key no longer held is left as it is and logged, not lost", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const e = await register();
    const sealed = (await storedRow(e.id))!.secret;
    await sealStoredSecrets({ ...env, WEBHOOK_ENCRYPTION_KEY: NEW_KEY });
    expect((await storedRow(e.id))!.secret).toBe(sealed);
    expect(
      error.mock.calls.some(([line]) => String(line).includes("webhook secret not sealed")),
    ).toBe(true);
  });

  it("without WEBHOOK_ENCRYPTION_KEY an endpoint cannot be registered: 500, the setting logged, nothing stored", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const res = await callWith({ WEBHOOK_ENCRYPTION_KEY: "" }, "/admin/v1/webhooks", {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ url: "https://hooks.example.com/none", eventTypes: ["key.banned"] }),
    });
    await expectError(res, 500, "internal_error");
    expect(
      error.mock.calls.some(([line]) => String(line).includes("WEBHOOK_ENCRYPTION_KEY is not set")),
    ).toBe(true);
    const stored = await env.DB.prepare(
      "SELECT count(*) AS n FROM webhook_endpoints WHERE url = 'https://hooks.example.com/none'",
    ).first<{ n: number }>();
    expect(stored!.n).toBe(0);
  });
});
