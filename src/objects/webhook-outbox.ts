import { log } from "../lib/log";
import {
  eventId,
  type ProducedEvent,
  queueEvents,
  type WebhookMessage,
} from "../lib/webhook-events";
import { alertsBetween, type QuotaAlert } from "../quota/alerts";
import type { Policy, UsageState } from "../quota/windows";
import { type AlarmSchedule, D1_RETRY_MS } from "./alarm-schedule";

/** A schema addition of the key's object (quota-limiter-schema.ts): the events not yet queued. */
export const CREATE_WEBHOOK_OUTBOX_TABLE = `CREATE TABLE IF NOT EXISTS webhook_outbox (
  type TEXT NOT NULL, window_key INTEGER NOT NULL, ends_at INTEGER NOT NULL, at INTEGER NOT NULL,
  data TEXT NOT NULL, queued INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (type, window_key)) STRICT`;

/**
 * The key's usage alerts and bans (quota/alerts.ts): written with the count that crosses a
 * threshold (never lost, once per type and window), and queued by the alarm, not the request.
 */
export class WebhookOutbox {
  constructor(
    private readonly sql: SqlStorage,
    private readonly alarms: AlarmSchedule,
    /** None: webhooks are not configured. */
    private readonly queue: () => Queue<WebhookMessage> | undefined,
    private readonly keyId: string | undefined,
  ) {}

  /** Keeps the alerts the change from `before` to `after` produces, and wakes the alarm for them. */
  observe(before: UsageState, after: UsageState, policy: Policy | null, now: number): void {
    const alerts = alertsBetween(before, after, policy, now);
    if (alerts.length === 0 || !this.keyId || !this.queue()) return;
    for (const alert of alerts) this.#insert(alert, now);
    this.alarms.wakeNoLaterThan(now, "could not schedule the webhook events' queueing");
  }

  /** Keeps `key.unbanned` for the ban to `bannedUntil`, once however it ends (window: its end). */
  banEnded(bannedUntil: number, endedAt: number): void {
    if (!this.keyId || !this.queue()) return;
    this.#keepUnbanned(bannedUntil, endedAt);
    this.alarms.wakeNoLaterThan(endedAt, "could not schedule the webhook events' queueing");
  }

  #keepUnbanned(bannedUntil: number, endedAt: number): void {
    const data = {
      bannedUntil: new Date(bannedUntil).toISOString(),
      unbannedAt: new Date(endedAt).toISOString(),
    };
    this.#insert({ type: "key.unbanned", window: bannedUntil, endsAt: bannedUntil, data }, endedAt);
  }

  /** Keeps `event`, produced at `at`, once per type and window. */
  #insert(event: Omit<QuotaAlert, "type"> & { type: string }, at: number): void {
    this.sql.exec(
      "INSERT OR IGNORE INTO webhook_outbox (type, window_key, ends_at, at, data) VALUES (?, ?, ?, ?, ?)",
      event.type,
      event.window,
      event.endsAt,
      at,
      JSON.stringify(event.data),
    );
  }

  /**
   * Queues the events not yet queued, and `key.unbanned` for each ban run out. A queued row stays
   * while its window lasts, so the window cannot produce it again.
   */
  async send(now: number): Promise<void> {
    const { keyId } = this;
    const ended = this.sql
      .exec<{ until: number }>(
        "SELECT window_key AS until FROM webhook_outbox WHERE type = 'key.banned' AND window_key <= ?",
        now,
      )
      .toArray();
    for (const { until } of ended) this.#keepUnbanned(until, until);
    this.sql.exec("DELETE FROM webhook_outbox WHERE queued = 1 AND ends_at <= ?", now);
    const rows = this.sql
      .exec<{ type: string; window: number; at: number; data: string }>(
        "SELECT type, window_key AS window, at, data FROM webhook_outbox WHERE queued = 0",
      )
      .toArray();
    if (rows.length === 0 || !keyId) return;
    const events: ProducedEvent[] = await Promise.all(
      rows.map(async (r) => ({
        id: await eventId(r.type, keyId, r.window),
        type: r.type,
        at: r.at,
        keyId,
        data: JSON.parse(r.data) as Record<string, unknown>,
      })),
    );
    if (await queueEvents(this.queue(), events)) {
      for (const r of rows)
        this.sql.exec(
          "UPDATE webhook_outbox SET queued = 1 WHERE type = ? AND window_key = ?",
          r.type,
          r.window,
        );
      return;
    }
    log("warn", "webhook events not queued; retrying", { keyId });
    await this.alarms.noLaterThan(now + D1_RETRY_MS);
  }
}
