import { EMPTY_USAGE, type UsageState } from "../quota/windows";

/** Migration 1 of both objects that keep usage (see schema-migrations.ts). */
export const CREATE_USAGE_TABLE = `CREATE TABLE IF NOT EXISTS usage (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  minute_start INTEGER NOT NULL, minute_count INTEGER NOT NULL, minute_rejected INTEGER NOT NULL,
  day_start INTEGER NOT NULL, day_count INTEGER NOT NULL, banned_until INTEGER NOT NULL
) STRICT`;

/** A quota object's one-row usage table: written before its reply leaves (output gate). */
export class UsageTable {
  constructor(private readonly sql: SqlStorage) {}

  load(): UsageState {
    const row = this.sql
      .exec<Record<keyof UsageState, number>>(
        `SELECT minute_start AS minuteStart, minute_count AS minuteCount, minute_rejected AS minuteRejected,
                day_start AS dayStart, day_count AS dayCount, banned_until AS bannedUntil FROM usage WHERE id = 1`,
      )
      .toArray()[0];
    return row ? { ...row } : { ...EMPTY_USAGE };
  }

  save(s: UsageState): void {
    this.sql.exec(
      `INSERT INTO usage (id, minute_start, minute_count, minute_rejected, day_start, day_count, banned_until)
       VALUES (1, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET minute_start = excluded.minute_start, minute_count = excluded.minute_count,
         minute_rejected = excluded.minute_rejected, day_start = excluded.day_start, day_count = excluded.day_count,
         banned_until = excluded.banned_until`,
      s.minuteStart,
      s.minuteCount,
      s.minuteRejected,
      s.dayStart,
      s.dayCount,
      s.bannedUntil,
    );
  }

  clear(): void {
    this.sql.exec("DELETE FROM usage");
  }
}
