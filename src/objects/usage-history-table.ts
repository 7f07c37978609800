import type { RevisedUsageDay } from "../db/usage-history";
import { dayName } from "../lib/clock";
import type { Outcome } from "../quota/windows";

/**
 * QuotaLimiter migration 4: the key's daily totals not yet known to be in D1. IF NOT EXISTS
 * because an object whose version row is missing runs every migration again (see version 1).
 */
export const CREATE_USAGE_HISTORY_TABLE = `CREATE TABLE IF NOT EXISTS usage_history (
  day_start INTEGER PRIMARY KEY,
  admitted INTEGER NOT NULL DEFAULT 0, rate_limited INTEGER NOT NULL DEFAULT 0,
  quota_exceeded INTEGER NOT NULL DEFAULT 0, key_banned INTEGER NOT NULL DEFAULT 0
) STRICT`;

/**
 * QuotaLimiter migration 7: each held day's revision, raised by every change to its totals, so
 * D1 can tell a newer snapshot from an older one (a total can go down too: the unused permits of
 * a lease granted when leases were counted whole at grant come off when it is handed back). A table of its own rather than a column: migrations must
 * run again safely on an object whose version row is missing, and SQLite has no ADD COLUMN IF
 * NOT EXISTS.
 */
export const CREATE_USAGE_REVISIONS_TABLE = `CREATE TABLE IF NOT EXISTS usage_history_revisions (
  day_start INTEGER PRIMARY KEY, revision INTEGER NOT NULL
) STRICT`;

/**
 * QuotaLimiter migration 10: per day, permits leased and never reported used (their holder was
 * evicted or crashed, or its hand-back was lost), apart from the requests admitted. A table of
 * its own for the same reason as the revisions'.
 */
export const CREATE_USAGE_STRANDED_TABLE = `CREATE TABLE IF NOT EXISTS usage_history_stranded (
  day_start INTEGER PRIMARY KEY, permits INTEGER NOT NULL
) STRICT`;

// The outcome → column map also keeps column names out of any caller's hands.
const COLUMN_OF: Partial<Record<Outcome, string>> = {
  allowed: "admitted",
  rate_limited: "rate_limited",
  quota_exceeded: "quota_exceeded",
  key_banned: "key_banned",
};

/**
 * Per UTC day, how many requests the object admitted and refused by reason. Rows stay until
 * D1 holds their finished day, so at most a few exist (today, and any day D1 could not take yet);
 * SQLite writes are durable before the object answers, so no count is lost to an eviction.
 */
export class UsageHistoryTable {
  constructor(private readonly sql: SqlStorage) {}

  /**
   * Counts `requests` decisions with `outcome` in their day (requests admitted from a lease are
   * counted as its holder reports them); true when this started the day's row. Revocations are
   * not counted.
   */
  count(outcome: Outcome, dayStart: number, requests = 1): boolean {
    const column = COLUMN_OF[outcome];
    if (!column) return false;
    // One statement per request: the row's new total equals `requests` exactly when this started it.
    const [row] = this.sql
      .exec<{ total: number }>(
        `INSERT INTO usage_history (day_start, ${column}) VALUES (?, ?)
         ON CONFLICT (day_start) DO UPDATE SET ${column} = ${column} + excluded.${column}
         RETURNING admitted + rate_limited + quota_exceeded + key_banned AS total`,
        dayStart,
        requests,
      )
      .toArray();
    this.#revise(dayStart);
    return row?.total === requests;
  }

  /** Raises the revision of a day's totals (they changed). */
  #revise(dayStart: number): void {
    this.sql.exec(
      `INSERT INTO usage_history_revisions (day_start, revision) VALUES (?, 1)
       ON CONFLICT (day_start) DO UPDATE SET revision = revision + 1`,
      dayStart,
    );
  }

  /**
   * Counts `permits` leased and never reported used in their day, apart from its admissions;
   * true when this started the day's row.
   */
  strand(dayStart: number, permits: number): boolean {
    if (permits <= 0) return false;
    const started =
      this.sql.exec("INSERT OR IGNORE INTO usage_history (day_start) VALUES (?)", dayStart)
        .rowsWritten > 0;
    this.sql.exec(
      `INSERT INTO usage_history_stranded (day_start, permits) VALUES (?, ?)
       ON CONFLICT (day_start) DO UPDATE SET permits = permits + excluded.permits`,
      dayStart,
      permits,
    );
    this.#revise(dayStart);
    return started;
  }

  /**
   * Takes back `requests` admissions of a day still held (the unused permits of a lease granted
   * when leases were counted whole at grant).
   */
  uncountAdmitted(dayStart: number, requests: number): void {
    if (requests <= 0) return;
    const { rowsWritten } = this.sql.exec(
      "UPDATE usage_history SET admitted = MAX(0, admitted - ?) WHERE day_start = ?",
      requests,
      dayStart,
    );
    if (rowsWritten > 0) this.#revise(dayStart);
  }

  /** Every day held, oldest first, with its day start and revision. */
  days(): Array<RevisedUsageDay & { dayStart: number }> {
    return this.sql
      .exec<{
        day_start: number;
        admitted: number;
        rate_limited: number;
        quota_exceeded: number;
        key_banned: number;
        stranded: number;
        revision: number;
      }>(
        `SELECT h.day_start, h.admitted, h.rate_limited, h.quota_exceeded, h.key_banned,
                COALESCE(s.permits, 0) AS stranded, COALESCE(r.revision, 0) AS revision
         FROM usage_history h LEFT JOIN usage_history_revisions r ON r.day_start = h.day_start
           LEFT JOIN usage_history_stranded s ON s.day_start = h.day_start
         ORDER BY h.day_start`,
      )
      .toArray()
      .map((r) => ({
        dayStart: r.day_start,
        day: dayName(r.day_start),
        admitted: r.admitted,
        refused: {
          rate_limited: r.rate_limited,
          quota_exceeded: r.quota_exceeded,
          key_banned: r.key_banned,
        },
        stranded: r.stranded,
        revision: r.revision,
      }));
  }

  /** Forgets days that started before `dayStart` (D1 has them). */
  forgetDaysBefore(dayStart: number): void {
    this.sql.exec("DELETE FROM usage_history WHERE day_start < ?", dayStart);
    this.sql.exec("DELETE FROM usage_history_revisions WHERE day_start < ?", dayStart);
    this.sql.exec("DELETE FROM usage_history_stranded WHERE day_start < ?", dayStart);
  }
}
