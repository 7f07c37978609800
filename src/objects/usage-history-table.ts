import { type RevisedUsageDay, saveUsageDays, type UsageDay } from "../db/usage-history";
import { DAY_MS, dayName, MINUTE_MS } from "../lib/clock";
import { logFailure } from "../lib/log";
import type { Outcome } from "../quota/windows";
import { type AlarmSchedule, D1_RETRY_MS } from "./alarm-schedule";

/** QuotaLimiter migration 4: the key's daily totals not yet known to be in D1. */
export const CREATE_USAGE_HISTORY_TABLE = `CREATE TABLE IF NOT EXISTS usage_history (
  day_start INTEGER PRIMARY KEY,
  admitted INTEGER NOT NULL DEFAULT 0, rate_limited INTEGER NOT NULL DEFAULT 0,
  quota_exceeded INTEGER NOT NULL DEFAULT 0, key_banned INTEGER NOT NULL DEFAULT 0
) STRICT`;

/**
 * QuotaLimiter migration 7: each held day's revision, raised by every change to its totals, so D1
 * keeps the newest. A table, as SQLite has no ADD COLUMN IF NOT EXISTS for a migration run again.
 */
export const CREATE_USAGE_REVISIONS_TABLE = `CREATE TABLE IF NOT EXISTS usage_history_revisions (
  day_start INTEGER PRIMARY KEY, revision INTEGER NOT NULL
) STRICT`;

/** QuotaLimiter migration 10: per day, permits leased and never reported used (a table: as above). */
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

type HeldDay = RevisedUsageDay & { dayStart: number };

const usageDayOf = ({ dayStart, revision, ...day }: HeldDay): UsageDay => day;

/** The key's day history (admitted, refused by reason), held until the alarm writes it to D1. */
export class UsageHistoryTable {
  constructor(
    private readonly sql: SqlStorage,
    private readonly alarms: AlarmSchedule,
    private readonly db: () => D1Database,
    private readonly keyId: string | undefined,
  ) {}

  /** Counts `requests` decisions with `outcome` in the day at `dayStart` (revocations: none). */
  count(outcome: Outcome, dayStart: number, requests: number): void {
    const column = COLUMN_OF[outcome];
    if (!column || requests <= 0) return;
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
    this.#revise(dayStart, { started: row?.total === requests });
  }

  /** Adds `requests` served from leases to the day; negative, takes them off (counted twice). */
  countServed(dayStart: number, requests: number): void {
    const takeOff = "UPDATE usage_history SET admitted = MAX(0, admitted - ?) WHERE day_start = ?";
    if (requests >= 0) this.count("allowed", dayStart, requests);
    else if (this.sql.exec(takeOff, -requests, dayStart).rowsWritten > 0)
      this.#revise(dayStart, { started: false });
  }

  /** Raises the revision of a day's totals; a day just `started` gets its D1 write's alarm. */
  #revise(dayStart: number, { started }: { started: boolean }): void {
    this.sql.exec(
      `INSERT INTO usage_history_revisions (day_start, revision) VALUES (?, 1)
       ON CONFLICT (day_start) DO UPDATE SET revision = revision + 1`,
      dayStart,
    );
    const writeAt = dayStart + DAY_MS + MINUTE_MS;
    if (started) this.alarms.wakeNoLaterThan(writeAt, "could not schedule the usage history write");
  }

  /** Counts `permits` leased and never reported used in their day, apart from its admissions. */
  strand(dayStart: number, permits: number): void {
    if (permits <= 0) return;
    const started =
      this.sql.exec("INSERT OR IGNORE INTO usage_history (day_start) VALUES (?)", dayStart)
        .rowsWritten > 0;
    this.sql.exec(
      `INSERT INTO usage_history_stranded (day_start, permits) VALUES (?, ?)
       ON CONFLICT (day_start) DO UPDATE SET permits = permits + excluded.permits`,
      dayStart,
      permits,
    );
    this.#revise(dayStart, { started });
  }

  /** Every day held, oldest first. */
  days(): UsageDay[] {
    return this.#revisedDays().map(usageDayOf);
  }

  #revisedDays(): HeldDay[] {
    type Totals = "admitted" | "rate_limited" | "quota_exceeded" | "key_banned" | "stranded";
    return this.sql
      .exec<Record<Totals | "dayStart" | "revision", number>>(
        `SELECT h.day_start AS dayStart, h.admitted, h.rate_limited, h.quota_exceeded,
                h.key_banned, COALESCE(s.permits, 0) AS stranded,
                COALESCE(r.revision, 0) AS revision
         FROM usage_history h LEFT JOIN usage_history_revisions r ON r.day_start = h.day_start
           LEFT JOIN usage_history_stranded s ON s.day_start = h.day_start
         ORDER BY h.day_start`,
      )
      .toArray()
      .map(({ dayStart, rate_limited, quota_exceeded, key_banned, ...r }) => ({
        dayStart,
        day: dayName(dayStart),
        admitted: r.admitted,
        refused: { rate_limited, quota_exceeded, key_banned },
        stranded: r.stranded,
        revision: r.revision,
      }));
  }

  /** Writes the days held here to D1, and returns them; a D1 failure is logged, not thrown. */
  async save(): Promise<UsageDay[]> {
    const days = this.#revisedDays();
    await this.#saveToDatabase(days).catch((err: unknown) =>
      logFailure("warn", "could not write usage history to D1", err),
    );
    return days.map(usageDayOf);
  }

  /** Writes the days before `dayStart` to D1 and forgets them (D1 failing: retried later). */
  async flushDaysBefore(dayStart: number, now: number): Promise<void> {
    const finished = this.#revisedDays().filter((d) => d.dayStart < dayStart);
    if (!finished.length) return;
    try {
      await this.#saveToDatabase(finished);
      for (const table of ["usage_history", "usage_history_revisions", "usage_history_stranded"])
        this.sql.exec(`DELETE FROM ${table} WHERE day_start < ?`, dayStart);
    } catch (err) {
      logFailure("warn", "could not write finished usage days to D1; retrying", err);
      await this.alarms.noLaterThan(now + D1_RETRY_MS);
    }
  }

  async #saveToDatabase(days: RevisedUsageDay[]): Promise<void> {
    if (!this.keyId) throw new Error("the quota object has no name (key id)");
    await saveUsageDays(this.db(), this.keyId, days);
  }
}
