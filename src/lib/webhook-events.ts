import { randomBase62 } from "./crypto";
import { toBase64Url } from "./encoding";
import { log } from "./log";

/**
 * An event as its producer queues it (the key's object, an admin change, the expiry scan). The
 * delivery side adds the key's name, owner and plan as D1 has them when it fans the event out
 * (routes/webhooks/consumer.ts), so producers need to know only the key's id.
 */
export interface ProducedEvent {
  /** `evt_…`, the same whoever produces it for the same key, type and window (eventId). */
  id: string;
  type: string;
  /** When it happened (epoch ms). */
  at: number;
  keyId: string;
  /** The event's own numbers: window, limit, used, resetAt, bannedUntil, expiresAt… */
  data: Record<string, unknown>;
}

/**
 * A delivery's message: the delivery to attempt, and the token of its retry chain (the
 * delivery's `queued_chain` when it was queued). A message whose chain is no longer the
 * delivery's was replaced by a later one and is dropped unattempted. Messages queued by the
 * release before carry no chain, and are attempted.
 */
export interface DeliveryMessage {
  kind: "delivery";
  deliveryId: string;
  chain?: string;
}

/** What the webhook queue carries: an event to fan out, or one delivery to attempt. */
export type WebhookMessage = { kind: "event"; event: ProducedEvent } | DeliveryMessage;

/**
 * How long each retry of a failed delivery waits, in seconds: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
 * 10 h, so a delivery is attempted 8 times over about 27.6 hours before it goes to the
 * dead-letter queue. The consumer's `max_retries` in wrangler.toml is this list's length
 * (test/webhooks.delivery.test.ts ties them). Each delay is within Queues' 12-hour maximum.
 */
export const WEBHOOK_RETRY_DELAYS_SECONDS = [5, 300, 1800, 7200, 18_000, 36_000, 36_000] as const;

/** How long a receiver has to answer one delivery before it counts as failed (and is retried). */
export const WEBHOOK_TIMEOUT_MS = 10_000;

/**
 * How long the queue consumer waits for a delivery attempt before it lets the attempt finish in
 * the background and retries its message no sooner than the attempt's timeout: the most a slow or
 * hanging receiver holds up the consumer, and so the deliveries to other endpoints queued behind
 * its batch (routes/webhooks/consumer.ts).
 */
export const WEBHOOK_HOLD_MS = 1_000;

/**
 * The delay before the retry of a delivery's `attempt`-th attempt (1-based), in seconds, from
 * `delays` (the schedule); undefined past its end. For an attempt the consumer stopped waiting
 * for (`held`), no sooner than WEBHOOK_TIMEOUT_MS, so a retry never overlaps the attempt before it.
 */
export function retryDelaySeconds(
  delays: readonly number[],
  attempt: number,
  { held }: { held: boolean },
): number | undefined {
  const delay = delays[attempt - 1];
  if (delay === undefined || !held) return delay;
  return Math.max(delay, Math.ceil(WEBHOOK_TIMEOUT_MS / 1000));
}

/**
 * How many messages the consumer handles at once, and the most a batch holds (`max_batch_size`
 * in wrangler.toml; test/webhooks.reliability.test.ts ties them). A Worker's invocation waits for
 * response headers on at most 6 connections at once and queues a seventh until one answers, so a
 * delivery beyond 6 would wait behind hanging receivers, its own 10 s running meanwhile. With 6 at
 * most, each attempt starts at once and is timed from its own request.
 */
export const WEBHOOK_CONCURRENCY = 6;

/**
 * The id of the event of `type` about key `keyId` in `window` (a day's start, a ban's end, an
 * expiry…): `evt_` and 20 base64url characters of SHA-256 over the three. Producing it twice
 * (a retried alarm, a repeated admin call) gives the same id, which is the receiver's dedupe key
 * and makes the delivery log keep one row per endpoint.
 */
export async function eventId(
  type: string,
  keyId: string,
  window: string | number,
): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`${type}\n${keyId}\n${window}`),
  );
  return `evt_${toBase64Url(new Uint8Array(digest).slice(0, 15))}`;
}

/**
 * Queues `events` for delivery; false (logged) when the queue refused them. Without a queue
 * binding (a deployment without webhooks) nothing is sent: true.
 */
export async function queueEvents(
  queue: Queue<WebhookMessage> | undefined,
  events: ProducedEvent[],
): Promise<boolean> {
  if (!queue || events.length === 0) return true;
  try {
    await queue.sendBatch(events.map((event) => ({ body: { kind: "event", event } })));
    return true;
  } catch (err) {
    log("warn", "could not queue webhook events", {
      events: events.map((e) => e.id).join(","),
      error: String(err),
    });
    return false;
  }
}

/** The most messages Queues takes in one sendBatch; a larger batch is refused whole. */
export const QUEUE_SEND_BATCH_MAX = 100;

/** A new retry chain's token: 16 base62 characters. */
export const newChain = (): string => randomBase62(16);

/**
 * How long a delivery queued and not yet attempted is left to its message before another fan-out
 * of its event may queue it again (the message presumed lost). Fan-outs within it (the sweep
 * meeting the writer, a retried alarm, Queues redelivering the event) queue nothing more; a
 * later one starts a new chain, which replaces the first.
 */
export const REQUEUE_AFTER_MS = 10 * 60_000;

/** A delivery claimed for queueing, and the chain its message starts (always set: new messages carry one). */
export type QueuedDelivery = Required<Omit<DeliveryMessage, "kind">>;

/**
 * Queues one attempt of each delivery in `deliveries`, in batches Queues takes (an event may have
 * more subscribed endpoints than one batch holds); throws when the queue refuses one.
 */
export async function queueDeliveriesOrThrow(
  queue: Queue<WebhookMessage>,
  deliveries: readonly QueuedDelivery[],
): Promise<void> {
  for (let start = 0; start < deliveries.length; start += QUEUE_SEND_BATCH_MAX) {
    const page = deliveries.slice(start, start + QUEUE_SEND_BATCH_MAX);
    await queue.sendBatch(page.map((d) => ({ body: { kind: "delivery", ...d } })));
  }
}
