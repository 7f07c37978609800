// Webhook events and their delivery: produced from the key's object's exact counts (80 % and
// 100 % of the day quota, once per day) and from admin changes, fanned out to the endpoints of
// the key's owner and of every owner, signed, retried on the schedule, a 410 disabling the
// endpoint (audited), and logged in D1. The queue consumer runs in the tests' isolate, so its
// outbound fetch is replaced by a receiver here.
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { getDeliveryWithEndpoint } from "../src/db/webhooks";
import {
  type ProducedEvent,
  WEBHOOK_RETRY_DELAYS_SECONDS,
  type WebhookMessage,
} from "../src/lib/webhook-events";
import { verifyWebhook } from "../src/lib/webhook-signature";
import { consumeWebhookBatch } from "../src/routes/webhooks/consumer";
import { queueExpiringEvents } from "../src/routes/webhooks/expiring";
import { ADMIN, auth, call, callWith, issueKey, patchKey, postJson } from "./helpers";
import {
  createEndpoint as endpoint,
  insertTestDelivery,
  type Received,
  receiveDeliveries,
  wranglerToml,
} from "./webhook-fixtures";

/** What the receiver answers (200 unless told), and every request the consumer sent. */
let answer: (r: Received) => Response | Promise<Response> = () => new Response("ok");
beforeEach(() => {
  answer = () => new Response("ok");
});
const received = receiveDeliveries((r) => answer(r));

/** A queue that records what is sent to it, and never delivers. */
function recordingQueue() {
  const sent: WebhookMessage[] = [];
  return {
    sent,
    queue: {
      send: async (body: WebhookMessage) => void sent.push(body),
      sendBatch: async (messages: Iterable<{ body: WebhookMessage }>) => {
        for (const m of messages) sent.push(m.body);
      },
    } as unknown as Queue,
  };
}

async function waitFor<T>(what: string, read: () => T | undefined, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs the consumer on `messages` (with `bindings` swapped in) and returns its acks and retries. */
async function consume(
  messages: { body: WebhookMessage; attempts?: number }[],
  bindings: Partial<Record<keyof Env, unknown>> = {},
) {
  const batch = createMessageBatch<WebhookMessage>(
    "animal-store-webhooks",
    messages.map((m, i) => ({
      id: `m${i}`,
      timestamp: new Date(),
      attempts: m.attempts ?? 1,
      body: m.body,
    })),
  );
  // getQueueResult does not report a retry's delay: the messages' retry() calls are watched too.
  const delays = new Map<string, number | undefined>();
  for (const m of batch.messages) {
    const retry = m.retry.bind(m);
    m.retry = (options) => {
      delays.set(m.id, options?.delaySeconds);
      retry(options);
    };
  }
  const ctx = createExecutionContext();
  await consumeWebhookBatch(batch, { ...env, ...bindings } as Env, ctx);
  const result = await getQueueResult(batch, ctx);
  return {
    ...result,
    retryMessages: result.retryMessages.map((r) => ({ ...r, delaySeconds: delays.get(r.msgId) })),
  };
}

/** A delivery of a test payload to endpoint `endpointId`, ready for an attempt. */
const delivery = insertTestDelivery;

describe("usage alerts from the key's object, end to end through the queue", () => {
  it("a tiny enterprise key crossing 80 % and 100 % sends each once, signed, to its owner's and everyone's endpoints", async () => {
    const owner = `acct_${crypto.randomUUID().slice(0, 8)}`;
    const mine = await endpoint({
      url: "https://hooks.example.com/mine",
      eventTypes: ["quota.day.warning", "quota.day.exhausted"],
      ownerId: owner,
    });
    const everyone = await endpoint({
      url: "https://hooks.example.com/all",
      eventTypes: ["quota.day.exhausted"],
    });
    await endpoint({
      url: "https://hooks.example.com/other",
      eventTypes: ["quota.day.warning", "quota.day.exhausted"],
      ownerId: "someone-else",
    });
    const key = await issueKey("enterprise", { perMinute: 100, perDay: 10 }, { ownerId: owner });
    for (let i = 0; i < 12; i++) await call("/v1/pets", { headers: auth(key.key) });
    const ours = () => received.filter((r) => JSON.parse(r.body).data?.key?.id === key.id);
    await waitFor("three deliveries", () => (ours().length >= 3 ? true : undefined));
    await new Promise((r) => setTimeout(r, 1500)); // nothing more arrives
    const got = ours();
    expect(got.map((r) => `${r.url} ${JSON.parse(r.body).type}`).sort()).toEqual([
      "https://hooks.example.com/all quota.day.exhausted",
      "https://hooks.example.com/mine quota.day.exhausted",
      "https://hooks.example.com/mine quota.day.warning",
    ]);
    const secretOf = (url: string) => (url.endsWith("/mine") ? mine.secret : everyone.secret);
    for (const r of got) {
      const now = Math.floor(Date.now() / 1000);
      expect(await verifyWebhook(secretOf(r.url), r.headers, r.body, now)).toBe(true);
      const body = JSON.parse(r.body);
      expect(r.headers.get("webhook-id")).toBe(body.id);
      expect(r.headers.get("content-type")).toBe("application/json");
      expect(body.data.key).toEqual({
        id: key.id,
        name: "test-enterprise",
        ownerId: owner,
        plan: "enterprise",
      });
      expect(body.data).toMatchObject({ window: "day", limit: 10 });
      expect(Date.parse(body.data.resetAt) % 86_400_000).toBe(0);
    }
    const warning = got.find((r) => JSON.parse(r.body).type === "quota.day.warning")!;
    expect(JSON.parse(warning.body).data).toMatchObject({ threshold: 8 });
    // The same event has the same id at every endpoint: the receiver's dedupe key.
    const exhaustedIds = got
      .filter((r) => JSON.parse(r.body).type === "quota.day.exhausted")
      .map((r) => r.headers.get("webhook-id"));
    expect(new Set(exhaustedIds).size).toBe(1);
    const log = await call(`/admin/v1/webhooks/${mine.id}/deliveries`, { headers: ADMIN });
    const { data } = (await log.json()) as {
      data: Array<{ status: string; attempts: number; responseStatus: number; latencyMs: number }>;
    };
    expect(data).toHaveLength(2);
    for (const d of data) {
      expect(d).toMatchObject({ status: "delivered", attempts: 1, responseStatus: 200 });
      expect(d.latencyMs).toBeGreaterThanOrEqual(0);
    }
  });
});

describe("the consumer", () => {
  it("fans an event out to the enabled endpoints subscribed to it, once per endpoint however often it comes", async () => {
    const owner = `acct_${crypto.randomUUID().slice(0, 8)}`;
    const a = await endpoint({
      url: "https://a.example.com/",
      eventTypes: ["key.banned"],
      ownerId: owner,
    });
    const b = await endpoint({
      url: "https://b.example.com/",
      eventTypes: ["key.banned", "key.revoked"],
    });
    await endpoint({ url: "https://c.example.com/", eventTypes: ["key.revoked"], ownerId: owner });
    const off = await endpoint({ url: "https://d.example.com/", eventTypes: ["key.banned"] });
    await call(`/admin/v1/webhooks/${off.id}`, {
      method: "PATCH",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: '{"enabled":false}',
    });
    const key = await issueKey("pro", undefined, { ownerId: owner });
    const event: ProducedEvent = {
      id: `evt_${crypto.randomUUID().slice(0, 20)}`,
      type: "key.banned",
      at: Date.now(),
      keyId: key.id,
      data: { bannedUntil: "2030-01-01T00:00:00.000Z" },
    };
    const q = recordingQueue();
    const first = await consume([{ body: { kind: "event", event } }], { WEBHOOK_QUEUE: q.queue });
    expect(first.explicitAcks).toEqual(["m0"]);
    expect(q.sent).toHaveLength(2);
    const ids = q.sent.map((m) => (m.kind === "delivery" ? m.deliveryId : ""));
    const endpoints = await Promise.all(
      ids.map(async (id) => (await getDeliveryWithEndpoint(env.DB, id))?.endpoint?.id),
    );
    expect(endpoints.sort()).toEqual([a.id, b.id].sort());
    // The event again (at-least-once): no new delivery in the log.
    await consume([{ body: { kind: "event", event } }, { body: { kind: "event", event } }], {
      WEBHOOK_QUEUE: q.queue,
    });
    for (const e of [a, b]) {
      const res = await call(`/admin/v1/webhooks/${e.id}/deliveries`, { headers: ADMIN });
      expect(((await res.json()) as { data: unknown[] }).data).toHaveLength(1);
    }
  });

  it("retries a failing receiver on the schedule, then delivers; the log shows each attempt's status", async () => {
    const e = await endpoint({ url: "https://flaky.example.com/", eventTypes: ["key.banned"] });
    const id = await delivery(e.id);
    answer = () => new Response("no", { status: 503 });
    const one = await consume([{ body: { kind: "delivery", deliveryId: id }, attempts: 1 }]);
    expect(one.retryMessages).toEqual([{ msgId: "m0", delaySeconds: 5 }]);
    let row = (await getDeliveryWithEndpoint(env.DB, id))!.delivery;
    expect(row).toMatchObject({ status: "retrying", attempts: 1, responseStatus: 503 });
    expect(row.lastError).toBe("the receiver answered 503");
    const two = await consume([{ body: { kind: "delivery", deliveryId: id }, attempts: 2 }]);
    expect(two.retryMessages).toEqual([{ msgId: "m0", delaySeconds: 300 }]);
    answer = () => new Response(null, { status: 204 });
    const three = await consume([{ body: { kind: "delivery", deliveryId: id }, attempts: 3 }]);
    expect(three.explicitAcks).toEqual(["m0"]);
    row = (await getDeliveryWithEndpoint(env.DB, id))!.delivery;
    expect(row).toMatchObject({
      status: "delivered",
      attempts: 3,
      responseStatus: 204,
      lastError: null,
    });
    expect(received).toHaveLength(3);
    expect(new Set(received.map((r) => r.headers.get("webhook-id"))).size).toBe(1);
  });

  it("after the last retry the delivery fails and goes to the dead-letter queue", async () => {
    const e = await endpoint({ url: "https://down.example.com/", eventTypes: ["key.banned"] });
    const id = await delivery(e.id);
    answer = () => new Response("no", { status: 500 });
    const last = WEBHOOK_RETRY_DELAYS_SECONDS.length + 1;
    const result = await consume([{ body: { kind: "delivery", deliveryId: id }, attempts: last }]);
    expect(result.retryMessages).toEqual([{ msgId: "m0", delaySeconds: 0 }]);
    expect((await getDeliveryWithEndpoint(env.DB, id))!.delivery).toMatchObject({
      status: "failed",
      nextAttemptAt: null,
    });
  });

  it("a 410 disables the endpoint, audited as system; later deliveries to it are skipped", async () => {
    const e = await endpoint({ url: "https://gone.example.com/", eventTypes: ["key.banned"] });
    const id = await delivery(e.id);
    answer = () => new Response("gone", { status: 410 });
    const result = await consume([{ body: { kind: "delivery", deliveryId: id } }]);
    expect(result.explicitAcks).toEqual(["m0"]);
    const read = await (await call(`/admin/v1/webhooks/${e.id}`, { headers: ADMIN })).json();
    expect(read).toMatchObject({
      enabled: false,
      disabledReason: "the receiver answered 410 Gone",
    });
    const audit = (await (
      await call("/admin/v1/audit?action=webhook_disable", { headers: ADMIN })
    ).json()) as {
      data: Array<{ keyId: string; actor: string }>;
    };
    expect(audit.data.filter((x) => x.keyId === e.id)).toEqual([
      expect.objectContaining({ actor: "system" }),
    ]);
    const next = await delivery(e.id);
    const skipped = await consume([{ body: { kind: "delivery", deliveryId: next } }]);
    expect(skipped.explicitAcks).toEqual(["m0"]);
    expect((await getDeliveryWithEndpoint(env.DB, next))!.delivery.status).toBe("skipped");
    expect(received).toHaveLength(1);
  });

  it("a receiver that never answers is cut off by the timeout and retried; another endpoint in the batch is delivered", async () => {
    const slow = await endpoint({ url: "https://slow.example.com/", eventTypes: ["key.banned"] });
    const fast = await endpoint({ url: "https://fast.example.com/", eventTypes: ["key.banned"] });
    const [s, f] = [await delivery(slow.id), await delivery(fast.id)];
    answer = (r) =>
      r.url.includes("slow")
        ? Promise.reject(Object.assign(new Error("timed out"), { name: "TimeoutError" }))
        : new Response("ok");
    const result = await consume([
      { body: { kind: "delivery", deliveryId: s } },
      { body: { kind: "delivery", deliveryId: f } },
    ]);
    expect(result.explicitAcks).toEqual(["m1"]);
    expect(result.retryMessages).toEqual([{ msgId: "m0", delaySeconds: 5 }]);
    expect((await getDeliveryWithEndpoint(env.DB, s))!.delivery.lastError).toBe(
      "no answer within 10000 ms",
    );
    expect((await getDeliveryWithEndpoint(env.DB, f))!.delivery.status).toBe("delivered");
  });

  it("signs with both secrets during a roll's grace period", async () => {
    const e = await endpoint({ url: "https://roll.example.com/", eventTypes: ["key.banned"] });
    const res = await postJson(
      `/admin/v1/webhooks/${e.id}/roll-secret`,
      { gracePeriodSeconds: 600 },
      ADMIN,
    );
    const { secret } = (await res.json()) as { secret: string };
    await consume([{ body: { kind: "delivery", deliveryId: await delivery(e.id) } }]);
    const [r] = received;
    expect(r!.headers.get("webhook-signature")!.split(" ")).toHaveLength(2);
    const now = Math.floor(Date.now() / 1000);
    expect(await verifyWebhook(secret, r!.headers, r!.body, now)).toBe(true);
    expect(await verifyWebhook(e.secret, r!.headers, r!.body, now)).toBe(true);
  });
});

describe("events from admin changes and the expiry scan", () => {
  it("revoke, roll and unban queue key.revoked, key.rolled and key.unbanned after the answer", async () => {
    const q = recordingQueue();
    const key = await issueKey("pro");
    const json = { ...ADMIN, "Content-Type": "application/json" };
    const roll = await callWith(
      { WEBHOOK_QUEUE: q.queue },
      `/admin/v1/keys/${key.id}/roll`,
      { method: "POST", headers: json, body: '{"gracePeriodSeconds":0}' },
      { wait: true },
    );
    expect(roll.status).toBe(201);
    const revoke = await callWith(
      { WEBHOOK_QUEUE: q.queue },
      `/admin/v1/keys/${key.id}`,
      { method: "DELETE", headers: ADMIN },
      { wait: true },
    );
    expect(revoke.status).toBe(200);
    const events = q.sent.map((m) => (m.kind === "event" ? m.event : null));
    expect(events.map((e) => e?.type)).toEqual(["key.rolled", "key.revoked"]);
    expect(events.every((e) => e?.keyId === key.id && /^evt_[A-Za-z0-9_-]{20}$/.test(e.id))).toBe(
      true,
    );
    expect(events[1]?.data).toHaveProperty("revokedAt");
  });

  it("the hourly scan queues key.expiring once per expiry, 7 days ahead", async () => {
    const q = recordingQueue();
    const now = Date.now();
    const soon = await issueKey("pro", undefined, {
      expiresAt: new Date(now + 3 * 86_400_000).toISOString(),
    });
    const later = await issueKey("pro", undefined, {
      expiresAt: new Date(now + 8 * 86_400_000).toISOString(),
    });
    const bindings = { ...env, WEBHOOK_QUEUE: q.queue } as Env;
    await queueExpiringEvents(bindings, now);
    const ids = () => q.sent.map((m) => (m.kind === "event" ? m.event.keyId : ""));
    expect(ids()).toContain(soon.id);
    expect(ids()).not.toContain(later.id);
    const count = q.sent.length;
    await queueExpiringEvents(bindings, now + 3_600_000);
    expect(q.sent.slice(count).map((m) => (m.kind === "event" ? m.event.keyId : ""))).not.toContain(
      soon.id,
    );
    // A new expiry is a new event.
    expect(
      (await patchKey(soon.id, { expiresAt: new Date(now + 5 * 86_400_000).toISOString() })).status,
    ).toBe(200);
    await queueExpiringEvents(bindings, now + 7_200_000);
    expect(ids().filter((id) => id === soon.id)).toHaveLength(2);
  });
});

describe("the retry schedule", () => {
  it("spans at least a day, each delay within Queues' 12 hours, and matches the consumer's max_retries", () => {
    const total = WEBHOOK_RETRY_DELAYS_SECONDS.reduce((a, b) => a + b, 0);
    expect(total).toBeGreaterThanOrEqual(86_400);
    for (const d of WEBHOOK_RETRY_DELAYS_SECONDS) expect(d).toBeLessThanOrEqual(43_200);
    const retries = [...wranglerToml.matchAll(/^max_retries = (\d+)$/gm)].map((m) => Number(m[1]));
    expect(retries).toEqual([7, 7, 7]);
    expect(retries[0]).toBe(WEBHOOK_RETRY_DELAYS_SECONDS.length);
    const dlqs = [...wranglerToml.matchAll(/^dead_letter_queue = "(.+)"$/gm)].map((m) => m[1]);
    expect(dlqs).toHaveLength(3);
  });
});
