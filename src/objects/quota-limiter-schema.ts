import { CREATE_ADMISSIONS_TABLE } from "./admission-memory";
import type { ObjectSchema } from "./schema-migrations";
import {
  CREATE_USAGE_HISTORY_TABLE,
  CREATE_USAGE_REVISIONS_TABLE,
  CREATE_USAGE_STRANDED_TABLE,
} from "./usage-history-table";
import { CREATE_USAGE_TABLE } from "./usage-table";
import { CREATE_WEBHOOK_OUTBOX_TABLE } from "./webhook-outbox";

const CREATE_POLICY_TABLE = `CREATE TABLE IF NOT EXISTS policy (
  id INTEGER PRIMARY KEY CHECK (id = 1), per_minute INTEGER NOT NULL, per_day INTEGER NOT NULL,
  version INTEGER NOT NULL, revoked INTEGER NOT NULL) STRICT`;

// Idempotency records, dropped by version 3 (moved to D1); version 1 stays as shipped.
const CREATE_IDEMPOTENCY_TABLE = `CREATE TABLE IF NOT EXISTS idempotency (
  idem_key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, created_at INTEGER NOT NULL,
  claimed_at INTEGER NOT NULL, status INTEGER, body TEXT, location TEXT) STRICT`;

/**
 * The object's storage schema, oldest first; append to change it (never edit a shipped entry).
 * IF NOT EXISTS throughout: version 1 predates versioning, and an object whose version row is
 * missing runs every migration again.
 */
export const QUOTA_LIMITER_MIGRATIONS = [
  [CREATE_USAGE_TABLE, CREATE_IDEMPOTENCY_TABLE, CREATE_POLICY_TABLE].join(";\n"),
  // 2: admission leases granted and not yet given back (see quota/lease.ts).
  `CREATE TABLE IF NOT EXISTS leases (
    id TEXT PRIMARY KEY, minute_start INTEGER NOT NULL, day_start INTEGER NOT NULL,
    permits INTEGER NOT NULL, expires_at INTEGER NOT NULL) STRICT`,
  "DROP TABLE IF EXISTS idempotency",
  CREATE_USAGE_HISTORY_TABLE,
  // 5: bans D1 has not fully heard of yet (ban-records.ts).
  `CREATE TABLE IF NOT EXISTS ban_records (
    banned_until INTEGER PRIMARY KEY, started_at INTEGER NOT NULL,
    start_written INTEGER NOT NULL DEFAULT 0) STRICT`,
  // 6: leases with the most permits each may still hold unused (heldBound). Re-created rather
  // than altered, so that running every migration again works; a lease dropped here is never
  // credited back (its permits stay counted until its minute ends).
  `DROP TABLE IF EXISTS leases;
  CREATE TABLE leases (
    id TEXT PRIMARY KEY, minute_start INTEGER NOT NULL, day_start INTEGER NOT NULL,
    permits INTEGER NOT NULL, expires_at INTEGER NOT NULL, held INTEGER NOT NULL) STRICT`,
  CREATE_USAGE_REVISIONS_TABLE,
  // 8: the location holder a lease was granted to (null: an isolate), told of changes to the key.
  "ALTER TABLE leases ADD COLUMN grantee TEXT",
  // 9: a lease's permits the usage history counts as served so far (lease-ledger.ts); those
  // granted before were counted whole. Safe to run again: version 6 re-creates the table.
  `ALTER TABLE leases ADD COLUMN counted INTEGER NOT NULL DEFAULT 0;
  UPDATE leases SET counted = permits`,
  CREATE_USAGE_STRANDED_TABLE,
] as const;

/** The contract above, and the additive steps the release before ignores (schema-migrations.ts). */
export const QUOTA_LIMITER_SCHEMA: ObjectSchema = {
  contract: QUOTA_LIMITER_MIGRATIONS,
  readsThrough: QUOTA_LIMITER_MIGRATIONS.length,
  additions: [
    { name: "admissions", sql: CREATE_ADMISSIONS_TABLE },
    { name: "webhook_outbox", sql: CREATE_WEBHOOK_OUTBOX_TABLE },
  ],
};

/** Whether a QuotaLimiter's storage holds work for its alarm. */
export function holdsWorkForLater(sql: SqlStorage): boolean {
  return (
    sql
      .exec<{ held: number }>(
        `SELECT EXISTS (SELECT 1 FROM usage) OR EXISTS (SELECT 1 FROM usage_history)
            OR EXISTS (SELECT 1 FROM leases) OR EXISTS (SELECT 1 FROM ban_records)
            OR EXISTS (SELECT 1 FROM admissions)
            OR EXISTS (SELECT 1 FROM webhook_outbox WHERE queued = 0) AS held`,
      )
      .one().held === 1
  );
}
