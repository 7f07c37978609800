// An event's fan-out to many endpoints: Queues takes at most 100 messages per sendBatch
// (QUEUE_SEND_BATCH_MAX), so an event more than 100 endpoints subscribe to is queued in several
// batches instead of one that the queue refuses (which failed the fan-out on every retry, and no
// endpoint got the event).
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  type ProducedEvent,
  QUEUE_SEND_BATCH_MAX,
  queueDeliveriesOrThrow,
  type WebhookMessage,
} from "../src/lib/webhook-events";
import { consumeWebhookBatch } from "../src/routes/webhooks/consumer";
import { issueKey } from "./helpers";
import { createEndpoint } from "./webhook-fixtures";

/** A queue that, like Queues, refuses a sendBatch of more than 100 messages; records the rest. */
function queueWithTheBatchLimit() {
  const batches: WebhookMessage[][] = [];
  return {
    batches,
    queue: {
      send: async (body: WebhookMessage) => void batches.push([body]),
      sendBatch: async (messages: Iterable<{ body: WebhookMessage }>) => {
        const batch = [...messages].map((m) => m.body);
        if (batch.length > 100) throw new Error("Unknown Internal Error (15000)");
        batches.push(batch);
      },
    } as unknown as Queue<WebhookMessage>,
  };
}

describe("queueing deliveries in batches Queues takes", () => {
  it("the limit is Queues' own: 100 messages a batch", () => {
    expect(QUEUE_SEND_BATCH_MAX).toBe(100);
  });

  it("250 deliveries go out once each, in order, in batches of at most 100", async () => {
    const q = queueWithTheBatchLimit();
    const deliveries = Array.from({ length: 250 }, (_, i) => ({
      deliveryId: `whd_${String(i).padStart(20, "0")}`,
      chain: "c",
    }));
    await queueDeliveriesOrThrow(q.queue, deliveries);
    expect(q.batches.map((b) => b.length)).toEqual([100, 100, 50]);
    expect(q.batches.flat()).toEqual(deliveries.map((d) => ({ kind: "delivery", ...d })));
  });

  it("an event 101 endpoints subscribe to is fanned out to all of them, not retried", async () => {
    const owner = `acct_${crypto.randomUUID().slice(0, 8)}`;
    const endpoints = new Set<string>();
    for (let i = 0; i < 101; i++) {
      const e = await createEndpoint({
        url: `https://hooks.example.com/many/${i}`,
        eventTypes: ["key.revoked"],
        ownerId: owner,
      });
      endpoints.add(e.id);
    }
    const key = await issueKey("free", undefined, { ownerId: owner });
    const event: ProducedEvent = {
      id: `evt_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`,
      type: "key.revoked",
      at: Date.now(),
      keyId: key.id,
      data: { revokedAt: new Date().toISOString() },
    };
    const q = queueWithTheBatchLimit();
    const batch = createMessageBatch<WebhookMessage>("animal-store-webhooks", [
      { id: "m0", timestamp: new Date(), attempts: 1, body: { kind: "event", event } },
    ]);
    const ctx = createExecutionContext();
    await consumeWebhookBatch(
      batch,
      { ...env, WEBHOOK_QUEUE: q.queue } as Env,
      createExecutionContext(),
    );
    const result = await getQueueResult(batch, ctx);
    expect(result.retryMessages).toEqual([]);
    expect(result.explicitAcks).toEqual(["m0"]);
    const queued = q.batches.flat().map((m) => (m.kind === "delivery" ? m.deliveryId : m.kind));
    expect(new Set(queued).size).toBe(queued.length);
    const rows = await env.DB.prepare(
      "SELECT id, endpoint_id FROM webhook_deliveries WHERE event_id = ?1",
    )
      .bind(event.id)
      .all<{ id: string; endpoint_id: string }>();
    const ours = rows.results.filter((r) => endpoints.has(r.endpoint_id));
    expect(ours).toHaveLength(101);
    expect(queued).toEqual(expect.arrayContaining(ours.map((r) => r.id)));
  });
});
