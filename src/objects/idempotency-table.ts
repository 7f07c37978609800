import { DAY_MS, MINUTE_MS } from "../lib/clock";

/** A stored outcome of an idempotent request, replayed to retries. */
export interface StoredResponse {
  status: number;
  body: string;
  location: string | null;
}

export type Claim =
  | { state: "proceed" }
  | { state: "replay"; response: StoredResponse }
  | { state: "mismatch" }
  | { state: "in_flight" };

/** Records are kept 24 hours; a claim whose request died unanswered is taken over after a minute. */
export const IDEMPOTENCY_TTL_MS = DAY_MS;
const IN_FLIGHT_TIMEOUT_MS = MINUTE_MS;

type Row = {
  fingerprint: string;
  createdAt: number;
  claimedAt: number;
  status: number | null;
  body: string | null;
  location: string | null;
};

export const CREATE_IDEMPOTENCY_TABLE = `CREATE TABLE IF NOT EXISTS idempotency (
  idem_key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, created_at INTEGER NOT NULL,
  claimed_at INTEGER NOT NULL, status INTEGER, body TEXT, location TEXT) STRICT`;

/** Idempotency-Key records of one API key, in its quota object's SQLite storage. */
export class IdempotencyTable {
  constructor(private readonly sql: SqlStorage) {}

  /** Atomic (the object runs one call at a time, and this does no I/O in between). */
  claim(key: string, fingerprint: string, now: number): Claim {
    const row = this.sql
      .exec<Row>(
        "SELECT fingerprint, created_at AS createdAt, claimed_at AS claimedAt, status, body, location FROM idempotency WHERE idem_key = ?",
        key,
      )
      .toArray()[0];
    if (!row || now - row.createdAt >= IDEMPOTENCY_TTL_MS) {
      this.sql.exec(
        `INSERT INTO idempotency (idem_key, fingerprint, created_at, claimed_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (idem_key) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at,
           claimed_at = excluded.claimed_at, status = NULL, body = NULL, location = NULL`,
        key,
        fingerprint,
        now,
        now,
      );
      return { state: "proceed" };
    }
    if (row.fingerprint !== fingerprint) return { state: "mismatch" };
    if (row.status !== null)
      return {
        state: "replay",
        response: { status: row.status, body: row.body ?? "", location: row.location },
      };
    if (now - row.claimedAt < IN_FLIGHT_TIMEOUT_MS) return { state: "in_flight" };
    // The first request died unanswered: take over its claim (keeping its 24 h). If it did create
    // the pet, the database guard returns that pet instead of making a second one.
    this.sql.exec("UPDATE idempotency SET claimed_at = ? WHERE idem_key = ?", now, key);
    return { state: "proceed" };
  }

  complete(key: string, response: StoredResponse): void {
    this.sql.exec(
      "UPDATE idempotency SET status = ?, body = ?, location = ? WHERE idem_key = ?",
      response.status,
      response.body,
      response.location,
      key,
    );
  }

  release(key: string): void {
    this.sql.exec("DELETE FROM idempotency WHERE idem_key = ? AND status IS NULL", key);
  }

  /** Deletes expired records; returns when the oldest remaining one expires, if any. */
  purge(now: number): number | null {
    this.sql.exec("DELETE FROM idempotency WHERE created_at <= ?", now - IDEMPOTENCY_TTL_MS);
    const oldest = this.sql
      .exec<{ t: number | null }>("SELECT MIN(created_at) AS t FROM idempotency")
      .one().t;
    return oldest === null ? null : oldest + IDEMPOTENCY_TTL_MS;
  }
}
