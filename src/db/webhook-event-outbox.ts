import { log } from "../lib/log";
import { type ProducedEvent, queueEvents, type WebhookMessage } from "../lib/webhook-events";
import { guarded, type Queryable } from "./database-error";

const INSERT_EVENT = "INSERT OR IGNORE INTO webhook_event_outbox (event_id, event, created_at)";

/** Keeps `event` in D1's webhook outbox (migrations/0014), once per event id. */
export function outboxEventStatement(
  db: Queryable,
  event: ProducedEvent,
  now: number,
): D1PreparedStatement {
  return db
    .prepare(`${INSERT_EVENT} VALUES (?1, ?2, ?3)`)
    .bind(event.id, JSON.stringify(event), now);
}

/**
 * Keeps `event` in the outbox only if the statement before it in the batch changed one row (as
 * appendAuditIfChangedStatement): placed after a conditional change and its audit entry, the event
 * is kept exactly when the change it reports was written.
 */
export function outboxEventIfChangedStatement(
  db: Queryable,
  event: ProducedEvent,
  now: number,
): D1PreparedStatement {
  return db
    .prepare(`${INSERT_EVENT} SELECT ?1, ?2, ?3 WHERE changes() = 1`)
    .bind(event.id, JSON.stringify(event), now);
}

/** The outbox's events with these ids (those still in it), or its oldest `limit` without ids. */
export function outboxEvents(
  db: Queryable,
  which: { ids: readonly string[] } | { limit: number },
): Promise<ProducedEvent[]> {
  return guarded(async () => {
    const statement =
      "ids" in which
        ? db
            .prepare(
              "SELECT event FROM webhook_event_outbox WHERE event_id IN (SELECT value FROM json_each(?1))",
            )
            .bind(JSON.stringify(which.ids))
        : db
            .prepare(
              "SELECT event FROM webhook_event_outbox ORDER BY created_at, event_id LIMIT ?1",
            )
            .bind(which.limit);
    const { results } = await statement.all<{ event: string }>();
    return results.map((r) => JSON.parse(r.event) as ProducedEvent);
  });
}

/** Deletes the events the queue has taken from the outbox. */
export function deleteOutboxEvents(db: Queryable, ids: readonly string[]): Promise<void> {
  return guarded(async () => {
    if (ids.length === 0) return;
    await db
      .prepare(
        "DELETE FROM webhook_event_outbox WHERE event_id IN (SELECT value FROM json_each(?1))",
      )
      .bind(JSON.stringify(ids))
      .run();
  });
}

/** Keeps `event` in the outbox on its own, for the sweep (an event the queue gave up on). */
export function keepOutboxEvent(db: Queryable, event: ProducedEvent, now: number): Promise<void> {
  return guarded(async () => {
    await outboxEventStatement(db, event, now).run();
  });
}

/**
 * Keeps each key.expiring event in the outbox in one batch with the mark on its key
 * (api_keys.expiring_event_for, what the hourly scan skips), so a key is never marked without
 * its event.
 */
export function keepExpiringEvents(
  db: Queryable,
  expiring: readonly { expiresAt: number; event: ProducedEvent }[],
  now: number,
): Promise<void> {
  return guarded(async () => {
    if (expiring.length === 0) return;
    await db.batch(
      expiring.flatMap(({ expiresAt, event }) => [
        outboxEventStatement(db, event, now),
        db
          .prepare("UPDATE api_keys SET expiring_event_for = ?2 WHERE id = ?1")
          .bind(event.keyId, expiresAt),
      ]),
    );
  });
}

/** Events the sweep hands to the queue at once (a queue batch takes at most 100 messages). */
const SWEEP_PAGE = 50;
/** Pages per sweep: the next hourly sweep takes the rest. */
const SWEEP_PAGES = 20;

/**
 * Hands the events with these ids, if still in D1's webhook outbox, to the queue, and deletes
 * them there; those the queue refuses stay for the sweep. The writer of an event calls it after
 * its answer (without a queue binding, webhooks are off: the events are dropped). Never throws: a failure is logged, and the sweep sends the event later.
 */
export async function sendOutboxEvents(
  db: Queryable,
  queue: Queue<WebhookMessage> | undefined,
  ids: readonly string[],
): Promise<void> {
  try {
    const events = await outboxEvents(db, { ids });
    if (events.length > 0 && (await queueEvents(queue, events)))
      await deleteOutboxEvents(
        db,
        events.map((e) => e.id),
      );
  } catch (err) {
    log("warn", "webhook events left in the outbox for the hourly sweep", {
      events: ids.join(","),
      error: String(err),
    });
  }
}

/**
 * The hourly sweep (the Worker's scheduled() handler): queues the events left in D1's webhook
 * outbox, oldest first, deleting each page the queue takes; stops at the first refusal. A sweep
 * that meets an event its writer is sending at the same moment queues it twice: one event id, so
 * the delivery log and the receiver keep one. Returns how many it queued.
 */
export async function sweepEventOutbox(
  db: Queryable,
  queue: Queue<WebhookMessage> | undefined,
): Promise<number> {
  let queued = 0;
  for (let page = 0; page < SWEEP_PAGES; page++) {
    const events = await outboxEvents(db, { limit: SWEEP_PAGE });
    if (events.length === 0 || !(await queueEvents(queue, events))) break;
    await deleteOutboxEvents(
      db,
      events.map((e) => e.id),
    );
    queued += events.length;
    if (events.length < SWEEP_PAGE) break;
  }
  if (queued > 0) log("info", "webhook events queued from the outbox", { queued });
  return queued;
}
