import { keepExpiringEvents, sendOutboxEvents } from "../../db/webhook-event-outbox";
import { keysExpiringWithoutEvent } from "../../db/webhooks";
import { DAY_MS, isoTime } from "../../lib/clock";
import { log } from "../../lib/log";
import { eventId, type ProducedEvent } from "../../lib/webhook-events";

/** How long before a key's expiry `key.expiring` is sent. */
export const EXPIRING_NOTICE_MS = 7 * DAY_MS;

/** Keys handled per scan: the scan runs hourly, and the next one takes the rest. */
const SCAN_LIMIT = 500;

/** Keys whose events are kept in one D1 batch (two statements each). */
const KEYS_PER_BATCH = 50;

/**
 * The hourly scan (the Worker's scheduled() handler): for every key that expires within
 * EXPIRING_NOTICE_MS and has had no `key.expiring` for that expiry, keeps the event in D1's
 * webhook outbox in one batch with the mark on the key (api_keys.expiring_event_for), then
 * queues it (what the queue refuses, the outbox's sweep sends later). So each expiry gets one
 * event (a key whose expiry is moved gets one for the new date). A key created with less than 7
 * days left gets it at the next scan. Returns how many events it made.
 */
export async function queueExpiringEvents(env: Env, now: number): Promise<number> {
  const keys = await keysExpiringWithoutEvent(env.DB, now, now + EXPIRING_NOTICE_MS, SCAN_LIMIT);
  const expiring = await Promise.all(
    keys.map(async (key) => {
      const event: ProducedEvent = {
        id: await eventId("key.expiring", key.id, key.expiresAt),
        type: "key.expiring",
        at: now,
        keyId: key.id,
        data: { expiresAt: isoTime(key.expiresAt), resetAt: isoTime(key.expiresAt) },
      };
      return { expiresAt: key.expiresAt, event };
    }),
  );
  for (let i = 0; i < expiring.length; i += KEYS_PER_BATCH) {
    const batch = expiring.slice(i, i + KEYS_PER_BATCH);
    await keepExpiringEvents(env.DB, batch, now);
    await sendOutboxEvents(
      env.DB,
      env.WEBHOOK_QUEUE,
      batch.map((e) => e.event.id),
    );
  }
  if (keys.length) log("info", "key.expiring events made", { found: keys.length });
  return keys.length;
}
