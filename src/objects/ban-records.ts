import { recordBanEnd, recordBanStart } from "../db/audit";
import { logFailure } from "../lib/log";
import { type AlarmSchedule, D1_RETRY_MS } from "./alarm-schedule";

/**
 * The key's bans D1 has not fully heard of: the alarm writes each start, then its end (a request
 * never waits for D1); each write is idempotent, so a failed one is tried again later.
 */
export class BanRecords {
  constructor(
    private readonly sql: SqlStorage,
    private readonly alarms: AlarmSchedule,
    private readonly db: () => D1Database,
    private readonly keyId: string | undefined,
  ) {}

  /** Keeps a new ban for D1 and wakes the alarm now to write it. */
  note(now: number, bannedUntil: number): void {
    this.sql.exec(
      "INSERT OR IGNORE INTO ban_records (banned_until, started_at) VALUES (?, ?)",
      bannedUntil,
      now,
    );
    this.alarms.wakeNoLaterThan(now, "could not schedule the ban's record");
  }

  /** Forgets every ban: the operator's unban is audited (and clears D1's ban) by the admin API. */
  forget(): void {
    this.sql.exec("DELETE FROM ban_records");
  }

  /** Writes the bans' starts and the ends that have come; re-arms for the next end or a retry. */
  async record(now: number): Promise<void> {
    const { db, keyId } = this;
    const rows = this.sql
      .exec<{ until: number; startedAt: number; startWritten: number }>(
        "SELECT banned_until AS until, started_at AS startedAt, start_written AS startWritten FROM ban_records",
      )
      .toArray();
    if (!rows.length || !keyId) return;
    let next = Number.POSITIVE_INFINITY;
    for (const row of rows) {
      try {
        if (!row.startWritten) {
          await recordBanStart(db(), keyId, row);
          this.sql.exec(
            "UPDATE ban_records SET start_written = 1 WHERE banned_until = ?",
            row.until,
          );
        }
        if (row.until > now) {
          next = Math.min(next, row.until);
          continue;
        }
        await recordBanEnd(db(), keyId, row.until);
        this.sql.exec("DELETE FROM ban_records WHERE banned_until = ?", row.until);
      } catch (err) {
        logFailure("warn", "could not record a ban in D1; retrying", err, { keyId });
        next = Math.min(next, now + D1_RETRY_MS);
      }
    }
    if (next !== Number.POSITIVE_INFINITY) await this.alarms.noLaterThan(next);
  }
}
