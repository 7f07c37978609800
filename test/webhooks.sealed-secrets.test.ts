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
import { consumeDeadLetters } from "../src/routes/webhooks/dead-letters";
import { SEAL_LIMIT, sealStoredSecrets } from "../src/routes/webhooks/seal-secrets";
import { ADMIN, call, callWith, expectError, postJson } from "./helpers";
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
  return attempt(await insertTestDelivery(endpointId), 1, bindings);
}

/** The `attempts`-th attempt of delivery `id` through the consumer; the queue's result. */
async function attempt(
  id: string,
  attempts: number,
  bindings: Partial<Record<keyof Env, unknown>> = {},
) {
  const batch = createMessageBatch<WebhookMessage>("animal-store-webhooks", [
    { id: "m0", timestamp: new Date(), attempts, body: { kind: "delivery", deliveryId: id } },
  ]);
  await consumeWebhookBatch(batch, { ...env, ...bindings } as Env, createExecutionContext());
  return getQueueResult(batch, createExecutionContext());
}

/** Delivery `id` of endpoint `endpointId` as the delivery log shows it. */
async function logged(endpointId: string, id: string) {
  const res = await call(`/admin/v1/webhooks/${endpointId}/deliveries`, { headers: ADMIN });
  const { data } = (await res.json()) as { data: Array<Record<string, unknown>> };
  return data.find((d) => d.id === id);
}

/** Rolls endpoint `id`'s secret with a grace period, on a deployment with `bindings`. */
async function roll(id: string, bindings: Partial<Record<keyof Env, unknown>> = {}) {
  const res = await callWith(bindings, `/admin/v1/webhooks/${id}/roll-secret`, {
    method: "POST",
    headers: { ...ADMIN, "Content-Type": "application/json" },
    body: JSON.stringify({ gracePeriodSeconds: 600 }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { secret: string };
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

  it("a delivery whose secret cannot be opened logs each attempt, not sent, with the reason, until dead", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const e = await register();
    const id = await insertTestDelivery(e.id);
    const lost = { WEBHOOK_ENCRYPTION_KEY: NEW_KEY };
    const first = await attempt(id, 1, lost);
    expect(received).toHaveLength(0);
    expect(first.retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    const why =
      /^not sent: the current signing secret cannot be opened: sealed under an unknown key/;
    expect(await logged(e.id, id)).toMatchObject({
      status: "retrying",
      attempts: 1,
      responseStatus: null,
      lastError: expect.stringMatching(why),
      nextAttemptAt: expect.any(String),
    });
    // The last attempt fails the same way; the dead-letter queue then ends it, the reason kept.
    await attempt(id, 8, lost);
    expect(await logged(e.id, id)).toMatchObject({ status: "failed", attempts: 2 });
    const dead = createMessageBatch<WebhookMessage>("animal-store-webhooks-dlq", [
      { id: "m0", timestamp: new Date(), attempts: 1, body: { kind: "delivery", deliveryId: id } },
    ]);
    await consumeDeadLetters(dead, env as Env);
    expect(await logged(e.id, id)).toMatchObject({
      status: "dead",
      attempts: 2,
      lastError: expect.stringMatching(why),
    });
    expect(received).toHaveLength(0);
  });

  it("after the encryption key is lost, a roll with a grace period restores deliveries at once: signed with the new secret, the unopenable one logged", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const e = await register();
    const lost = { WEBHOOK_ENCRYPTION_KEY: NEW_KEY };
    const { secret } = await roll(e.id, lost);
    const result = await deliverTo(e.id, lost);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(received).toHaveLength(1);
    const signatures = received[0]!.headers.get("webhook-signature")!.split(" ");
    expect(signatures).toHaveLength(1);
    expect(await verifyWebhook(secret, received[0]!.headers, received[0]!.body, now())).toBe(true);
    const line = warn.mock.calls
      .map(([l]) => String(l))
      .find((l) => l.includes("signed without a secret that cannot be opened"));
    expect(line).toContain(e.id);
    expect(line).toContain("the previous signing secret cannot be opened");
  });

  it("the sealing pass walks past rows it cannot open: a full page of them holds up no other endpoint, and is logged in one line", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const lostBox = await secretBoxOf(crypto.getRandomValues(new Uint8Array(32)));
    const t = Date.now();
    const unreadable = await Promise.all(
      Array.from({ length: SEAL_LIMIT }, async (_, i) => {
        // "-" sorts before every id the service makes: these rows come first.
        const id = `whe_-${String(i).padStart(19, "0")}`;
        return env.DB.prepare(
          `INSERT INTO webhook_endpoints (id, url, event_types, secret, created_at, updated_at)
           VALUES (?1, 'https://hooks.example.com/lost', '["key.banned"]', ?2, ?3, ?3)`,
        ).bind(id, await sealSecret(lostBox, id, newWebhookSecret()), t);
      }),
    );
    await env.DB.batch(unreadable);
    const secret = newWebhookSecret();
    const plain = await plaintextEndpoint(secret);
    expect(plain > `whe_-${"9".repeat(19)}`).toBe(true);
    expect(await sealStoredSecrets(env)).toBeGreaterThanOrEqual(1);
    const row = await storedRow(plain);
    expect(row!.secret.startsWith(SEALED_PREFIX)).toBe(true);
    const box = await webhookSecretBoxOrThrow(configOrThrow(env));
    expect(await openSecretOrThrow(box, plain, row!.secret)).toBe(secret);
    const lines = error.mock.calls
      .map(([l]) => String(l))
      .filter((l) => l.includes("webhook secret not sealed"));
    expect(lines).toHaveLength(1);
    // Earlier tests of this file leave a few such rows too.
    expect(JSON.parse(lines[0]!).count).toBeGreaterThanOrEqual(SEAL_LIMIT);
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
