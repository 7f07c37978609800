import { SYSTEM_ACTOR } from "../../db/audit";
import { getKey } from "../../db/keys";
import {
  type AttemptOutcome,
  addDeliveries,
  type DeliveryStatus,
  disableGoneEndpoint,
  endpointsFor,
  getDeliveryWithEndpoint,
  openSigningSecrets,
  recordAttempt,
  releaseDeliveries,
  skipDelivery,
  type WebhookEndpointRecord,
} from "../../db/webhooks";
import { clock, isoTime } from "../../lib/clock";
import { configOrThrow, webhookSecretBoxOrThrow } from "../../lib/config";
import { randomBase62 } from "../../lib/crypto";
import { log } from "../../lib/log";
import {
  type DeliveryMessage,
  newChain,
  type ProducedEvent,
  queueDeliveriesOrThrow,
  REQUEUE_AFTER_MS,
  retryDelaySeconds,
  WEBHOOK_CONCURRENCY,
  WEBHOOK_HOLD_MS,
  WEBHOOK_TIMEOUT_MS,
  type WebhookMessage,
} from "../../lib/webhook-events";
import { webhookHeaders } from "../../lib/webhook-signature";

/**
 * How deliveries leave the Worker: `fetch`, replaced in tests by a receiver of their own (as
 * `clock` is), since the queue consumer runs in the tests' isolate.
 */
export const outbound = { fetch: (request: Request): Promise<Response> => fetch(request) };

/** Why an endpoint was disabled without an operator: its receiver said it is gone for good. */
export const GONE_REASON = "the receiver answered 410 Gone";

/** The JSON body every endpoint gets for `event` about key `key`: Standard Webhooks' shape. */
export function payloadOf(
  event: ProducedEvent,
  key: { id: string; name: string; ownerId: string | null; plan: string } | null,
): string {
  return JSON.stringify({
    id: event.id,
    type: event.type,
    timestamp: isoTime(event.at),
    data: {
      key: key && { id: key.id, name: key.name, ownerId: key.ownerId, plan: key.plan },
      ...event.data,
    },
  });
}

/**
 * An event's fan-out: one delivery per enabled endpoint subscribed to its type (of the key's
 * owner, or for every owner), logged in D1 and queued, each then attempted on its own. The key's
 * name, owner and plan are read now, from D1. Throws (the event is retried) when D1 or the queue
 * fails; a retry queues again only the deliveries no message carries (addDeliveries), so a
 * delivery runs one retry chain however often its event is fanned out.
 */
async function fanOutOrThrow(env: Env, event: ProducedEvent): Promise<void> {
  const key = await getKey(env.DB, event.keyId);
  if (!key) return;
  const endpoints = await endpointsFor(env.DB, event.type, key.ownerId);
  if (endpoints.length === 0) return;
  const payload = payloadOf(event, key);
  const now = clock.now();
  const claimed = await addDeliveries(
    env.DB,
    event.id,
    endpoints.map((e) => ({
      id: `whd_${randomBase62(20)}`,
      endpointId: e.id,
      eventId: event.id,
      eventType: event.type,
      keyId: key.id,
      payload,
    })),
    { now, requeueBefore: now - REQUEUE_AFTER_MS, chain: newChain() },
  );
  try {
    await queueDeliveriesOrThrow(env.WEBHOOK_QUEUE, claimed);
  } catch (err) {
    // Not queued: released, so the event's retry queues them at once (a send that took part of
    // them started chains the next claim replaces).
    await releaseDeliveries(env.DB, claimed).catch(() => undefined);
    throw err;
  }
}

/** What became of one attempt: done (ack), or to be attempted again after `retryInSeconds`. */
type Attempted = { done: true } | { done: false; retryInSeconds: number };

/**
 * Attempts delivery `id`, the `attempt`-th time (Queues counts them), and logs it: a 2xx is
 * delivered; a 410 disables the endpoint (audited) and ends the delivery; anything else (another
 * status, a network error, no answer within WEBHOOK_TIMEOUT_MS) is retried after the next delay of
 * the schedule, or, past its end, fails and goes to the dead-letter queue.
 */
async function attemptOrThrow(
  env: Env,
  { deliveryId: id, chain }: DeliveryMessage,
  attempt: number,
  held: Held,
): Promise<Attempted> {
  const found = await getDeliveryWithEndpoint(env.DB, id);
  if (!found?.endpoint || ENDED.has(found.delivery.status)) return { done: true };
  const { delivery, endpoint } = found;
  // Another message carries this delivery's attempts since ("send again", a later fan-out).
  if (chain !== undefined && delivery.queuedChain !== null && delivery.queuedChain !== chain)
    return { done: true };
  const start = clock.now();
  if (endpoint.disabledAt !== null) {
    await skipDelivery(env.DB, id, start, `the endpoint is disabled (${endpoint.disabledReason})`);
    return { done: true };
  }
  const delays = configOrThrow(env).WEBHOOK_RETRY_DELAYS;
  let headers: Record<string, string>;
  try {
    headers = await webhookHeaders(
      await signingSecretsOrThrow(env, endpoint, start),
      delivery.eventId,
      Math.floor(start / 1000),
      delivery.payload,
    );
  } catch (err) {
    // Nothing was sent, yet the attempt counts and is retried as any other: the log says why.
    const error = `not sent: ${err instanceof Error ? err.message : String(err)}`;
    return failedAttempt(env, id, { attempt, delays, held }, start, {
      responseStatus: null,
      latencyMs: null,
      error,
    });
  }
  const started = Date.now();
  let responseStatus: number | null = null;
  let error: string | null = null;
  try {
    const res = await outbound.fetch(
      new Request(endpoint.url, {
        method: "POST",
        headers: {
          ...headers,
          "Content-Type": "application/json",
          "User-Agent": "animal-store-webhooks/1",
        },
        body: delivery.payload,
        redirect: "manual",
        signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
      }),
    );
    responseStatus = res.status;
    await res.body?.cancel();
    if (!res.ok) error = `the receiver answered ${res.status}`;
  } catch (err) {
    error =
      err instanceof Error && err.name === "TimeoutError"
        ? `no answer within ${WEBHOOK_TIMEOUT_MS} ms`
        : `could not be sent: ${String(err)}`;
  }
  const latencyMs = Date.now() - started;
  const now = clock.now();
  if (responseStatus !== null && responseStatus >= 200 && responseStatus < 300) {
    await recordAttempt(env.DB, id, now, {
      status: "delivered",
      responseStatus,
      latencyMs,
      error: null,
      nextAttemptAt: null,
    });
    return { done: true };
  }
  if (responseStatus === 410) {
    await disableGoneEndpoint(env.DB, endpoint.id, now, GONE_REASON, {
      at: now,
      actor: SYSTEM_ACTOR,
      action: "webhook_disable",
      keyId: endpoint.id,
      changes: {
        disabledAt: { before: null, after: isoTime(now) },
        disabledReason: { before: null, after: GONE_REASON },
      },
      requestId: `webhook-gone:${delivery.id}`,
      clientRequestId: null,
    });
    await recordAttempt(env.DB, id, now, {
      status: "failed",
      responseStatus,
      latencyMs,
      error: `${error}; the endpoint is disabled`,
      nextAttemptAt: null,
    });
    return { done: true };
  }
  return failedAttempt(env, id, { attempt, delays, held }, now, {
    responseStatus,
    latencyMs,
    error,
  });
}

/**
 * Records a failed `attempt` of delivery `id` at `now`: retried after the schedule's next delay,
 * or past its end failed (its retry then puts the message in the dead-letter queue, max_retries
 * reached). An attempt the consumer stopped waiting for had its retry set when it was held
 * (`held.at`), no sooner than its timeout: that is when the log says it is due.
 */
async function failedAttempt(
  env: Env,
  id: string,
  { attempt, delays, held }: { attempt: number; delays: readonly number[]; held: Held },
  now: number,
  outcome: Pick<AttemptOutcome, "responseStatus" | "latencyMs" | "error">,
): Promise<Attempted> {
  const delay = retryDelaySeconds(delays, attempt, { held: held.at !== null });
  await recordAttempt(env.DB, id, now, {
    ...outcome,
    status: delay === undefined ? "failed" : "retrying",
    nextAttemptAt: delay === undefined ? null : (held.at ?? now) + delay * 1000,
  });
  return { done: false, retryInSeconds: delay ?? 0 };
}

/**
 * The secrets endpoint's deliveries are signed with at `now`, opened. One that cannot be opened
 * (sealed under an encryption key since lost) is left out and logged, so a roll after the key was
 * lost signs with the new secret at once; throws when none opens (or the key is not set).
 */
async function signingSecretsOrThrow(
  env: Env,
  endpoint: WebhookEndpointRecord,
  now: number,
): Promise<string[]> {
  const box = await webhookSecretBoxOrThrow(configOrThrow(env));
  const { secrets, unopened } = await openSigningSecrets(box, endpoint, now);
  const why = unopened.map((u) => `the ${u.which} signing secret cannot be opened: ${u.reason}`);
  if (secrets.length === 0) throw new Error(why.join("; "));
  if (why.length)
    log("warn", "webhook delivery signed without a secret that cannot be opened", {
      endpointId: endpoint.id,
      error: why.join("; "),
    });
  return secrets;
}

/**
 * The Worker's queue() handler: fans events out and attempts deliveries, the whole batch at once
 * (a batch holds at most WEBHOOK_CONCURRENCY messages), each acknowledged or retried on its own.
 * It waits at most WEBHOOK_HOLD_MS for an attempt: one whose receiver has not answered by then
 * goes on in the background (ctx.waitUntil, which the consumer does not wait for:
 * `queue_consumer_no_wait_for_wait_until` in wrangler.toml) and logs its outcome there, while its
 * message is retried no sooner than the attempt's timeout, when the retry finds the delivery done
 * or attempts it again. So the invocation, and the next batch waiting for it, is held up by a slow
 * or hanging receiver for at most WEBHOOK_HOLD_MS, never for its WEBHOOK_TIMEOUT_MS. A message
 * whose handling throws (D1 or the queue unavailable) is retried after the schedule's delay for
 * its attempt.
 */
export async function consumeWebhookBatch(
  batch: MessageBatch<WebhookMessage>,
  env: Env,
  ctx: ExecutionContext,
): Promise<void> {
  const delays = configOrThrow(env).WEBHOOK_RETRY_DELAYS;
  const slots = slotsOf(WEBHOOK_CONCURRENCY);
  await Promise.all(
    batch.messages.map(async (message) => {
      await slots.take();
      const body = message.body;
      const held: Held = { at: null };
      const work = (
        body.kind === "event"
          ? fanOutOrThrow(env, body.event).then((): Attempted => ({ done: true }))
          : attemptOrThrow(env, body, message.attempts, held)
      ).catch((err): Attempted => {
        log("warn", "webhook message not handled; retrying", {
          kind: body.kind,
          error: String(err),
        });
        return { done: false, retryInSeconds: delays[message.attempts - 1] ?? 0 };
      });
      // The slot is given back when the work ends, also when it ends in the background.
      void work.then(slots.give);
      const outcome = body.kind === "event" ? await work : await holdFor(work, held);
      if (outcome === "held") {
        ctx.waitUntil(work);
        const delay = retryDelaySeconds(delays, message.attempts, { held: true });
        message.retry({ delaySeconds: delay ?? 0 });
      } else if (outcome.done) message.ack();
      else message.retry({ delaySeconds: outcome.retryInSeconds });
    }),
  );
}

/** When the consumer stopped waiting for an attempt (clock time), or null while it waits. */
interface Held {
  at: number | null;
}

/** Statuses a delivery's message has nothing more to do for (ack it). */
const ENDED: ReadonlySet<DeliveryStatus> = new Set(["delivered", "failed", "skipped", "dead"]);

/**
 * `work`'s outcome if it settles within WEBHOOK_HOLD_MS, else "held" (`held.at` set at that
 * moment, so the attempt, when it ends, logs the retry the consumer set for it).
 */
async function holdFor(work: Promise<Attempted>, held: Held): Promise<Attempted | "held"> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const hold = new Promise<"held">((resolve) => {
    timer = setTimeout(() => {
      held.at = clock.now();
      resolve("held");
    }, WEBHOOK_HOLD_MS);
  });
  try {
    return await Promise.race([work, hold]);
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
}

/**
 * At most `limit` holders at once: `take` waits for a free slot, `give` frees one. A batch is no
 * larger than the limit (max_batch_size), so no message ever waits; a larger one would wait for an
 * attempt to end, not for the handler to return, since a Worker has 6 connections at once.
 */
function slotsOf(limit: number): { take: () => Promise<void>; give: () => void } {
  let free = limit;
  const waiting: Array<() => void> = [];
  return {
    take: async () => {
      if (free > 0) free--;
      else await new Promise<void>((resolve) => waiting.push(resolve));
    },
    give: () => {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
