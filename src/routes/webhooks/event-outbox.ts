import { deleteOutboxEvents, outboxEvents } from "../../db/webhook-event-outbox";
import { log } from "../../lib/log";
import { queueEvents } from "../../lib/webhook-events";

/** Events the sweep hands to the queue at once (a queue batch takes at most 100 messages). */
const SWEEP_PAGE = 50;
/** Pages per sweep: the next hourly sweep takes the rest. */
const SWEEP_PAGES = 20;

/**
 * Hands the events with these ids, if still in D1's webhook outbox, to the queue, and deletes
 * them there; those the queue refuses stay for the sweep. The writer of an event calls it after
 * its answer. Never throws: a failure is logged, and the sweep sends the event later.
 */
export async function sendOutboxEvents(env: Env, ids: readonly string[]): Promise<void> {
  try {
    const events = await outboxEvents(env.DB, { ids });
    if (events.length > 0 && (await queueEvents(env.WEBHOOK_QUEUE, events)))
      await deleteOutboxEvents(
        env.DB,
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
export async function sweepEventOutbox(env: Env): Promise<number> {
  let queued = 0;
  for (let page = 0; page < SWEEP_PAGES; page++) {
    const events = await outboxEvents(env.DB, { limit: SWEEP_PAGE });
    if (events.length === 0 || !(await queueEvents(env.WEBHOOK_QUEUE, events))) break;
    await deleteOutboxEvents(
      env.DB,
      events.map((e) => e.id),
    );
    queued += events.length;
    if (events.length < SWEEP_PAGE) break;
  }
  if (queued > 0) log("info", "webhook events queued from the outbox", { queued });
  return queued;
}
