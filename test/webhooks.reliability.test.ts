// Webhook delivery's guarantees: every event at least once (the key's object's outbox, and D1's
// for admin changes and the expiry scan), key.unbanned once per ban however it ends, the
// dead-letter queue recorded in the delivery log, and a hanging receiver holding up no other
// endpoint. The queue consumer runs in the tests' isolate, so its outbound fetch is replaced by a
// receiver here.
import {
  createExecutionContext,
  createMessageBatch,
  getQueueResult,
  runDurableObjectAlarm,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { sweepEventOutbox } from "../src/db/webhook-event-outbox";
import worker from "../src/index";
import {
  eventId,
  WEBHOOK_CONCURRENCY,
  WEBHOOK_HOLD_MS,
  WEBHOOK_TIMEOUT_MS,
  type WebhookMessage,
} from "../src/lib/webhook-events";
import { consumeWebhookBatch, outbound } from "../src/routes/webhooks/consumer";
import { queueExpiringEvents } from "../src/routes/webhooks/expiring";
import { ADMIN, auth, BAN_MS, call, callWith, fixClock, issueKey, mockClock, T0 } from "./helpers";
import {
  createEndpoint as endpoint,
  insertTestDelivery,
  receiveDeliveries,
  wranglerToml,
} from "./webhook-fixtures";

/** Every request the consumer sent; the receiver answers 200. */
const received = receiveDeliveries();

async function waitFor<T>(what: string, read: () => T | undefined, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Nothing more arrives within a moment (the local queue batches for up to 1 s). */
const settle = () => new Promise((r) => setTimeout(r, 1500));

/** A queue that records what is sent to it, and never delivers. */
function recordingQueue() {
  const sent: WebhookMessage[] = [];
  const queue = {
    send: async (body: WebhookMessage) => void sent.push(body),
    sendBatch: async (messages: Iterable<{ body: WebhookMessage }>) => {
      for (const m of messages) sent.push(m.body);
    },
  } as unknown as Queue;
  const events = (keyId: string) =>
    sent.flatMap((m) => (m.kind === "event" && m.event.keyId === keyId ? [m.event] : []));
  return { sent, queue, events };
}

/** A queue that refuses everything (an outage). */
const refusingQueue = {
  send: () => Promise.reject(new Error("queue unavailable")),
  sendBatch: () => Promise.reject(new Error("queue unavailable")),
} as unknown as Queue;

/** A delivery of a test payload to a new endpoint at `url`, ready for its first attempt. */
async function deliveryTo(url: string): Promise<string> {
  return (await deliveryWithEndpoint(url)).id;
}

async function deliveryWithEndpoint(url: string): Promise<{ id: string; endpointId: string }> {
  const e = await endpoint({ url, eventTypes: ["key.banned"] });
  return { id: await insertTestDelivery(e.id), endpointId: e.id };
}

/** A batch of `bodies` from queue `queue`, each on its `attempts`-th delivery. */
function batchOf(queue: string, bodies: WebhookMessage[], attempts = 1) {
  return createMessageBatch<WebhookMessage>(
    queue,
    bodies.map((body, i) => ({ id: `m${i}`, timestamp: new Date(), attempts, body })),
  );
}

const bodies = (keyId: string, type: string) =>
  received
    .map((r) => ({ ...r, json: JSON.parse(r.body) }))
    .filter((r) => r.json.type === type && r.json.data?.key?.id === keyId);

describe("key.unbanned, once per ban", () => {
  const time = mockClock(T0);

  /** A key of `owner` banned at T0 (1 request a minute, hammered). */
  async function bannedKey(owner: string) {
    const key = await issueKey("enterprise", { perMinute: 1, perDay: 100 }, { ownerId: owner });
    let code = "";
    for (let i = 0; i < 20 && code !== "key_banned"; i++) {
      const res = await call("/v1/pets", { headers: auth(key.key) });
      if (res.status === 429) code = ((await res.json()) as { code: string }).code;
      else await res.body?.cancel();
    }
    expect(code).toBe("key_banned");
    return { key, stub: env.QUOTA.getByName(key.id), bannedUntil: T0 + BAN_MS };
  }

  it("is sent when the ban runs out, by the key's object at the ban's end", async () => {
    const owner = `acct_${crypto.randomUUID().slice(0, 8)}`;
    await endpoint({
      url: "https://unban.example.com/",
      eventTypes: ["key.unbanned"],
      ownerId: owner,
    });
    const { key, stub, bannedUntil } = await bannedKey(owner);
    await runDurableObjectAlarm(stub);
    time.now = bannedUntil;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await waitFor("key.unbanned", () => (bodies(key.id, "key.unbanned").length ? true : undefined));
    // Later alarms (the day's cleanup) send nothing more.
    time.now = bannedUntil + 24 * 3_600_000;
    await runDurableObjectAlarm(stub);
    await settle();
    const got = bodies(key.id, "key.unbanned");
    expect(got).toHaveLength(1);
    expect(got[0]!.json.data).toMatchObject({
      bannedUntil: new Date(bannedUntil).toISOString(),
      unbannedAt: new Date(bannedUntil).toISOString(),
    });
    expect(got[0]!.headers.get("webhook-id")).toBe(
      await eventId("key.unbanned", key.id, bannedUntil),
    );
  });

  it("an operator's unban sends it then, and the ban's end sends no second one", async () => {
    const owner = `acct_${crypto.randomUUID().slice(0, 8)}`;
    await endpoint({
      url: "https://lift.example.com/",
      eventTypes: ["key.unbanned"],
      ownerId: owner,
    });
    const { key, stub, bannedUntil } = await bannedKey(owner);
    time.now = T0 + 60_000;
    const res = await call(`/admin/v1/keys/${key.id}/unban`, { method: "POST", headers: ADMIN });
    expect(res.status).toBe(200);
    await runDurableObjectAlarm(stub);
    await waitFor("key.unbanned", () => (bodies(key.id, "key.unbanned").length ? true : undefined));
    time.now = bannedUntil;
    await runDurableObjectAlarm(stub);
    await settle();
    const got = bodies(key.id, "key.unbanned");
    expect(got).toHaveLength(1);
    expect(got[0]!.json.data).toMatchObject({
      bannedUntil: new Date(bannedUntil).toISOString(),
      unbannedAt: new Date(T0 + 60_000).toISOString(),
    });
  });
});

describe("events of admin changes and the expiry scan: kept in D1 until queued", () => {
  it("a roll and a revocation whose queue refuses their events keep them; the hourly sweep queues them once", async () => {
    const key = await issueKey("pro");
    const json = { ...ADMIN, "Content-Type": "application/json" };
    const roll = await callWith(
      { WEBHOOK_QUEUE: refusingQueue },
      `/admin/v1/keys/${key.id}/roll`,
      { method: "POST", headers: json, body: '{"gracePeriodSeconds":0}' },
      { wait: true },
    );
    expect(roll.status).toBe(201);
    const revoke = await callWith(
      { WEBHOOK_QUEUE: refusingQueue },
      `/admin/v1/keys/${key.id}`,
      { method: "DELETE", headers: ADMIN },
      { wait: true },
    );
    expect(revoke.status).toBe(200);
    const { revokedAt } = (await revoke.json()) as { revokedAt: string };
    const q = recordingQueue();
    await sweepEventOutbox(env.DB, q.queue);
    const events = q.events(key.id);
    expect(events.map((e) => e.type).sort()).toEqual(["key.revoked", "key.rolled"]);
    expect(events.find((e) => e.type === "key.rolled")?.id).toBe(
      await eventId("key.rolled", key.id, 2),
    );
    const revoked = events.find((e) => e.type === "key.revoked");
    expect(revoked?.id).toBe(await eventId("key.revoked", key.id, Date.parse(revokedAt)));
    expect(revoked?.data).toEqual({ revokedAt });
    // Queued: the outbox no longer holds them.
    await sweepEventOutbox(env.DB, q.queue);
    expect(q.events(key.id)).toHaveLength(2);
  });

  it("an event is kept only with the change it reports: revoking again, or rolling a revoked key, keeps none", async () => {
    const key = await issueKey("pro");
    const q = recordingQueue();
    const revoke = () =>
      callWith(
        { WEBHOOK_QUEUE: q.queue },
        `/admin/v1/keys/${key.id}`,
        { method: "DELETE", headers: ADMIN },
        { wait: true },
      );
    expect((await revoke()).status).toBe(200);
    expect((await revoke()).status).toBe(200);
    const roll = await callWith(
      { WEBHOOK_QUEUE: q.queue },
      `/admin/v1/keys/${key.id}/roll`,
      {
        method: "POST",
        headers: { ...ADMIN, "Content-Type": "application/json" },
        body: '{"gracePeriodSeconds":0}',
      },
      { wait: true },
    );
    expect(roll.status).toBe(409);
    await sweepEventOutbox(env.DB, q.queue);
    expect(q.events(key.id).map((e) => e.type)).toEqual(["key.revoked"]);
  });

  it("the expiry scan marks a key only with its event kept: a refusing queue leaves it for the sweep, not lost", async () => {
    const now = Date.now();
    const soon = await issueKey("pro", undefined, {
      expiresAt: new Date(now + 2 * 86_400_000).toISOString(),
    });
    await queueExpiringEvents({ ...env, WEBHOOK_QUEUE: refusingQueue } as Env, now);
    const q = recordingQueue();
    const working = { ...env, WEBHOOK_QUEUE: q.queue } as Env;
    // The next scan makes no second event for the expiry...
    await queueExpiringEvents(working, now + 3_600_000);
    expect(q.events(soon.id)).toEqual([]);
    // ...and the sweep queues the one kept.
    await sweepEventOutbox(env.DB, q.queue);
    const events = q.events(soon.id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      id: await eventId("key.expiring", soon.id, now + 2 * 86_400_000),
      type: "key.expiring",
    });
  });
});

describe("a hanging receiver holds up no other endpoint", () => {
  /**
   * Receivers whose host starts with "hang" answer only when released (503 then); the others at
   * once. Counts the attempts in flight.
   */
  function hangingReceivers() {
    const hung: Array<() => void> = [];
    const flight = { now: 0, most: 0 };
    vi.spyOn(outbound, "fetch").mockImplementation(async (request: Request) => {
      flight.most = Math.max(flight.most, ++flight.now);
      try {
        if (!new URL(request.url).hostname.startsWith("hang")) return new Response("ok");
        await new Promise<void>((resolve) => hung.push(resolve));
        return new Response("late", { status: 503 });
      } finally {
        flight.now--;
      }
    });
    return { hung, flight };
  }

  /** The batch of `ids` as the queue hands it over, watching each message's ack and retry. */
  function watchedBatch(ids: string[]) {
    const batch = createMessageBatch<WebhookMessage>(
      "animal-store-webhooks",
      ids.map((deliveryId, i) => ({
        id: `m${i}`,
        timestamp: new Date(),
        attempts: 1,
        body: { kind: "delivery", deliveryId },
      })),
    );
    const acked: string[] = [];
    const retried = new Map<string, number | undefined>();
    for (const m of batch.messages) {
      m.ack = () => void acked.push(m.id);
      m.retry = (options) => void retried.set(m.id, options?.delaySeconds);
    }
    return { batch, acked, retried };
  }

  it("a batch holds at most the consumer's concurrency, within Workers' 6 connections waiting for headers", () => {
    const sizes = [...wranglerToml.matchAll(/^max_batch_size = (\d+)$/gm)].map((m) => Number(m[1]));
    expect(sizes.length).toBeGreaterThanOrEqual(3);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(WEBHOOK_CONCURRENCY);
    expect(WEBHOOK_CONCURRENCY).toBeLessThanOrEqual(6);
  });

  it("in a full batch whose other receivers hang, the one that answers is delivered and acknowledged at once; each hanging one is retried on its own", async () => {
    const { hung } = hangingReceivers();
    const ids = [await deliveryTo("https://fine.example.com/")];
    for (let i = 1; i < WEBHOOK_CONCURRENCY; i++)
      ids.push(await deliveryTo(`https://hang${i}.example.com/`));
    const { batch, acked, retried } = watchedBatch(ids);
    const run = consumeWebhookBatch(batch, env as Env, createExecutionContext());
    await waitFor("the answering delivery's ack", () => (acked.includes("m0") ? true : undefined));
    expect(hung).toHaveLength(WEBHOOK_CONCURRENCY - 1);
    expect(retried.size).toBe(0);
    for (const release of hung) release();
    await run;
    expect(acked).toEqual(["m0"]);
    expect([...retried.keys()].sort()).toEqual(
      ids
        .slice(1)
        .map((_, i) => `m${i + 1}`)
        .sort(),
    );
    for (const delay of retried.values()) expect(delay).toBe(5);
  });

  /** Delivery `id` as the delivery log of `endpointId` shows it. */
  async function logged(endpointId: string, id: string) {
    const res = await call(`/admin/v1/webhooks/${endpointId}/deliveries`, { headers: ADMIN });
    const { data } = (await res.json()) as { data: Array<Record<string, unknown>> };
    return data.find((d) => d.id === id);
  }

  it("the consumer waits at most the hold for a hanging receiver: the batch ends, the attempt goes on in the background and is logged when it ends, its retry no sooner than the timeout", async () => {
    const { hung } = hangingReceivers();
    const fine = await deliveryTo("https://fine-hold.example.com/");
    const hanging = await deliveryWithEndpoint("https://hang-hold.example.com/");
    const { batch, acked, retried } = watchedBatch([fine, hanging.id]);
    const ctx = createExecutionContext();
    const began = Date.now();
    // Without the hold the batch would wait for this release.
    const release = setTimeout(() => hung.forEach((r) => r()), WEBHOOK_HOLD_MS + 3000);
    await consumeWebhookBatch(batch, env as Env, ctx);
    const took = Date.now() - began;
    expect(took).toBeGreaterThanOrEqual(WEBHOOK_HOLD_MS - 50);
    expect(took).toBeLessThan(WEBHOOK_HOLD_MS + 1500);
    expect(acked).toEqual(["m0"]);
    const timeoutSeconds = Math.ceil(WEBHOOK_TIMEOUT_MS / 1000);
    expect([...retried]).toEqual([["m1", timeoutSeconds]]);
    expect(hung).toHaveLength(1);
    expect(await logged(hanging.endpointId, hanging.id)).toMatchObject({
      status: "pending",
      attempts: 0,
    });
    clearTimeout(release);
    hung.forEach((r) => r());
    await waitOnExecutionContext(ctx);
    const after = await logged(hanging.endpointId, hanging.id);
    expect(after).toMatchObject({ status: "retrying", attempts: 1, responseStatus: 503 });
    // Due when its message's retry is: the hold's end plus the timeout.
    const due = Date.parse(String(after!.nextAttemptAt)) - began;
    expect(due).toBeGreaterThanOrEqual(WEBHOOK_HOLD_MS + timeoutSeconds * 1000 - 50);
    expect(due).toBeLessThan(WEBHOOK_HOLD_MS + timeoutSeconds * 1000 + 1500);
  });

  it("a receiver that answers 200 after the hold is delivered once: the held message's retry finds it delivered and sends nothing", async () => {
    let requests = 0;
    vi.spyOn(outbound, "fetch").mockImplementation(async () => {
      requests++;
      await new Promise((r) => setTimeout(r, WEBHOOK_HOLD_MS + 300));
      return new Response("ok");
    });
    const { id, endpointId } = await deliveryWithEndpoint("https://slow-ok.example.com/");
    const first = watchedBatch([id]);
    const ctx = createExecutionContext();
    await consumeWebhookBatch(first.batch, env as Env, ctx);
    expect(first.retried.has("m0")).toBe(true);
    await waitOnExecutionContext(ctx);
    expect(await logged(endpointId, id)).toMatchObject({ status: "delivered", attempts: 1 });
    const retry = batchOf("animal-store-webhooks", [{ kind: "delivery", deliveryId: id }], 2);
    await consumeWebhookBatch(retry, env as Env, createExecutionContext());
    expect((await getQueueResult(retry, createExecutionContext())).explicitAcks).toEqual(["m0"]);
    expect(requests).toBe(1);
  });

  it("a held last attempt that succeeds after its message reached the dead-letter queue ends delivered, not dead", async () => {
    const { hung } = hangingReceivers();
    vi.mocked(outbound.fetch).mockImplementation(async () => {
      await new Promise<void>((resolve) => hung.push(resolve));
      return new Response("ok");
    });
    const { id, endpointId } = await deliveryWithEndpoint("https://late.example.com/");
    const last = batchOf("animal-store-webhooks", [{ kind: "delivery", deliveryId: id }], 8);
    const ctx = createExecutionContext();
    await consumeWebhookBatch(last, env as Env, ctx);
    const dead = batchOf("animal-store-webhooks-dlq", [{ kind: "delivery", deliveryId: id }]);
    await worker.queue(dead, env as Env, createExecutionContext());
    expect(await logged(endpointId, id)).toMatchObject({ status: "dead" });
    hung.forEach((r) => r());
    await waitOnExecutionContext(ctx);
    expect(await logged(endpointId, id)).toMatchObject({ status: "delivered", attempts: 1 });
  });

  it("never more attempts at once than the concurrency; a waiting one starts as a slot frees", async () => {
    const { hung, flight } = hangingReceivers();
    const ids: string[] = [];
    for (let i = 0; i < WEBHOOK_CONCURRENCY + 2; i++)
      ids.push(await deliveryTo(`https://hang-more${i}.example.com/`));
    const { batch, retried } = watchedBatch(ids);
    const run = consumeWebhookBatch(batch, env as Env, createExecutionContext());
    await waitFor("the slots full", () => (hung.length === WEBHOOK_CONCURRENCY ? true : undefined));
    await settle();
    expect(flight.most).toBe(WEBHOOK_CONCURRENCY);
    hung.shift()!();
    await waitFor("the next attempt", () =>
      hung.length === WEBHOOK_CONCURRENCY ? true : undefined,
    );
    while (retried.size < ids.length) {
      for (const release of hung.splice(0)) release();
      await new Promise((r) => setTimeout(r, 20));
    }
    await run;
    expect(flight.most).toBe(WEBHOOK_CONCURRENCY);
  });
});

describe("one retry chain per delivery, however often its event is fanned out", () => {
  /** An event about a new key of a new owner, with one endpoint of that owner subscribed to it. */
  async function eventWithEndpoint() {
    const owner = `acct_${crypto.randomUUID().slice(0, 8)}`;
    const e = await endpoint({
      url: "https://twice.example.com/",
      eventTypes: ["key.revoked"],
      ownerId: owner,
    });
    const key = await issueKey("pro", undefined, { ownerId: owner });
    const event = {
      id: await eventId("key.revoked", key.id, Date.now()),
      type: "key.revoked",
      at: Date.now(),
      keyId: key.id,
      data: { revokedAt: new Date().toISOString() },
    };
    return { endpointId: e.id, event };
  }

  /** Fans `event` out through the consumer onto queue `q` (its event message acknowledged). */
  async function fanOut(event: WebhookMessage & { kind: "event" }, q: Queue) {
    const batch = batchOf("animal-store-webhooks", [event]);
    await consumeWebhookBatch(batch, { ...env, WEBHOOK_QUEUE: q } as Env, createExecutionContext());
    expect((await getQueueResult(batch, createExecutionContext())).explicitAcks).toEqual(["m0"]);
  }

  it("a second fan-out (the sweep, a retried alarm, Queues redelivering the event) while the delivery waits in the queue queues it no second time", async () => {
    const { event } = await eventWithEndpoint();
    const q = recordingQueue();
    await fanOut({ kind: "event", event }, q.queue);
    expect(q.sent).toHaveLength(1);
    await fanOut({ kind: "event", event }, q.queue);
    await fanOut({ kind: "event", event }, q.queue);
    expect(q.sent).toHaveLength(1);
  });

  it("a delivery queued again long after (its message presumed lost) runs only the newest chain: the older message is dropped unattempted", async () => {
    const { endpointId, event } = await eventWithEndpoint();
    const time = fixClock(Date.now());
    const q = recordingQueue();
    await fanOut({ kind: "event", event }, q.queue);
    time.now += 24 * 3_600_000;
    await fanOut({ kind: "event", event }, q.queue);
    expect(q.sent).toHaveLength(2);
    const [older, newer] = q.sent;
    const old = batchOf("animal-store-webhooks", [older!]);
    await consumeWebhookBatch(old, env as Env, createExecutionContext());
    expect((await getQueueResult(old, createExecutionContext())).explicitAcks).toEqual(["m0"]);
    expect(received).toHaveLength(0);
    const current = batchOf("animal-store-webhooks", [newer!]);
    await consumeWebhookBatch(current, env as Env, createExecutionContext());
    expect(received).toHaveLength(1);
    const res = await call(`/admin/v1/webhooks/${endpointId}/deliveries`, { headers: ADMIN });
    const { data } = (await res.json()) as { data: Array<{ status: string; attempts: number }> };
    expect(data).toEqual([expect.objectContaining({ status: "delivered", attempts: 1 })]);
  });

  it("send again while a chain is retrying replaces that chain: its next retry is dropped", async () => {
    const { id, endpointId } = await deliveryWithEndpoint("https://resent.example.com/");
    const q = recordingQueue();
    const resend = () =>
      callWith(
        { WEBHOOK_QUEUE: q.queue },
        `/admin/v1/webhooks/${endpointId}/deliveries/${id}/resend`,
        { method: "POST", headers: ADMIN },
      );
    expect((await resend()).status).toBe(202);
    expect((await resend()).status).toBe(202);
    const [first, second] = q.sent;
    const stale = batchOf("animal-store-webhooks", [first!], 2);
    await consumeWebhookBatch(stale, env as Env, createExecutionContext());
    expect(received).toHaveLength(0);
    await consumeWebhookBatch(
      batchOf("animal-store-webhooks", [second!]),
      env as Env,
      createExecutionContext(),
    );
    expect(received).toHaveLength(1);
  });
});

describe("the dead-letter queue's consumer", () => {
  it("marks a delivery the queue gave up on dead: a final state with its own filter, until send again", async () => {
    const { id, endpointId } = await deliveryWithEndpoint("https://dead.example.com/");
    vi.spyOn(outbound, "fetch").mockResolvedValue(new Response("no", { status: 500 }));
    // The last attempt fails: the webhook queue retries it once more, past max_retries.
    const last = batchOf("animal-store-webhooks", [{ kind: "delivery", deliveryId: id }], 8);
    await worker.queue(last, env as Env, createExecutionContext());
    const dead = batchOf("animal-store-webhooks-dlq", [{ kind: "delivery", deliveryId: id }]);
    const ctx = createExecutionContext();
    await worker.queue(dead, env as Env, createExecutionContext());
    expect((await getQueueResult(dead, ctx)).explicitAcks).toEqual(["m0"]);
    const log = async (query = "") =>
      (
        (await (
          await call(`/admin/v1/webhooks/${endpointId}/deliveries${query}`, { headers: ADMIN })
        ).json()) as { data: Array<{ id: string; status: string; nextAttemptAt: unknown }> }
      ).data;
    expect(await log()).toEqual([
      expect.objectContaining({ id, status: "dead", nextAttemptAt: null }),
    ]);
    expect((await log("?status=dead")).map((d) => d.id)).toEqual([id]);
    expect(await log("?status=failed")).toEqual([]);
    const q = recordingQueue();
    const resend = await callWith(
      { WEBHOOK_QUEUE: q.queue },
      `/admin/v1/webhooks/${endpointId}/deliveries/${id}/resend`,
      { method: "POST", headers: ADMIN },
    );
    expect(resend.status).toBe(202);
    expect((await log())[0]?.status).toBe("pending");
    expect(q.sent).toEqual([{ kind: "delivery", deliveryId: id, chain: expect.any(String) }]);
  });

  it("puts an event whose fan-out kept failing back in D1's outbox, which the sweep queues again", async () => {
    const key = await issueKey("pro");
    const event = {
      id: await eventId("key.revoked", key.id, 1),
      type: "key.revoked",
      at: Date.now(),
      keyId: key.id,
      data: { revokedAt: new Date().toISOString() },
    };
    const dead = batchOf("animal-store-webhooks-dlq", [{ kind: "event", event }]);
    await worker.queue(dead, env as Env, createExecutionContext());
    const q = recordingQueue();
    await sweepEventOutbox(env.DB, q.queue);
    expect(q.events(key.id)).toEqual([event]);
  });
});
