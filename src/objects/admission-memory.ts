import { ADMISSION_MEMORY_MS } from "../quota/lease-messages";

/**
 * The answers a key's object gave in the last ADMISSION_MEMORY_MS to the calls that carry an id
 * (an admission, a lease renewal). An addition to the object's schema (quota-limiter-schema.ts):
 * the release before has no such table and ignores it; rows it never wrote are simply absent.
 */
export const CREATE_ADMISSIONS_TABLE = `CREATE TABLE IF NOT EXISTS admissions (
    id TEXT PRIMARY KEY, decided_at INTEGER NOT NULL, answer TEXT NOT NULL) STRICT;
  CREATE INDEX IF NOT EXISTS admissions_by_time ON admissions (decided_at)`;

/** An answer forgets the ids past ADMISSION_MEMORY_MS at most this often (the alarm, the rest). */
const FORGET_EVERY_MS = 1_000;

/**
 * What makes admissions and renewals idempotent at the key's object: the answer to each call that
 * carries an id is kept, so that the same id asked again (a call retried after its answer was
 * lost, delivered twice, or an isolate falling back from its location holder) gets the same
 * answer and is counted once. Storage stays bounded: ids older than ADMISSION_MEMORY_MS are
 * forgotten by later answers and by the alarm.
 */
export class AdmissionMemory {
  /** When ids past the memory were last forgotten. */
  #forgotAt = 0;

  constructor(private readonly sql: SqlStorage) {}

  /** The answer given to call `id` within ADMISSION_MEMORY_MS before `now`, if any. */
  recall<T>(id: string, now: number): T | null {
    const row = this.sql
      .exec<{ answer: string }>(
        "SELECT answer FROM admissions WHERE id = ? AND decided_at > ?",
        id,
        now - ADMISSION_MEMORY_MS,
      )
      .toArray()[0];
    return row ? (JSON.parse(row.answer) as T) : null;
  }

  /** Keeps `answer`, given at `now` to call `id`. */
  remember(id: string, now: number, answer: object): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO admissions (id, decided_at, answer) VALUES (?, ?, ?)",
      id,
      now,
      JSON.stringify(answer),
    );
    if (now - this.#forgotAt >= FORGET_EVERY_MS) this.forgetOlderThanMemory(now);
  }

  /** Forgets the ids answered ADMISSION_MEMORY_MS or more before `now` (no retry comes for them). */
  forgetOlderThanMemory(now: number): void {
    this.sql.exec("DELETE FROM admissions WHERE decided_at <= ?", now - ADMISSION_MEMORY_MS);
    this.#forgotAt = now;
  }
}
