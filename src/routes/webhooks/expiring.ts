import { keysExpiringWithoutEvent, markExpiringEventQueued } from "../../db/webhooks";
import { DAY_MS, isoTime } from "../../lib/clock";
import { log } from "../../lib/log";
import { eventId, queueEvents } from "../../lib/webhook-events";

/** How long before a key's expiry `key.expiring` is sent. */
export const EXPIRING_NOTICE_MS = 7 * DAY_MS;

/** Keys handled per scan: the scan runs hourly, and the next one takes the rest. */
const SCAN_LIMIT = 500;

/**
 * The hourly scan (the Worker's scheduled() handler): queues `key.expiring` for every key that
 * expires within EXPIRING_NOTICE_MS and has had none for that expiry, and records it on the key
 * (api_keys.expiring_event_for), so each expiry gets one event (a key whose expiry is moved gets
 * one for the new date). A key created with less than 7 days left gets it at the next scan.
 */
export async function queueExpiringEvents(env: Env, now: number): Promise<number> {
  const keys = await keysExpiringWithoutEvent(env.DB, now, now + EXPIRING_NOTICE_MS, SCAN_LIMIT);
  let queued = 0;
  for (const key of keys) {
    const event = {
      id: await eventId("key.expiring", key.id, key.expiresAt),
      type: "key.expiring",
      at: now,
      keyId: key.id,
      data: {
        expiresAt: isoTime(key.expiresAt),
        resetAt: isoTime(key.expiresAt),
      },
    };
    if (!(await queueEvents(env.WEBHOOK_QUEUE, [event]))) break;
    await markExpiringEventQueued(env.DB, key.id, key.expiresAt);
    queued++;
  }
  if (keys.length) log("info", "key.expiring events queued", { queued, found: keys.length });
  return queued;
}
