import { type Limits, limitsOrThrow, type Plan } from "../quota/plans";
import { guarded, type Queryable } from "./database-error";

/** A key as the service knows it; never holds the secret or its hash. */
export interface KeyRecord {
  id: string;
  name: string;
  prefix: string;
  plan: Plan;
  limits: Limits;
  version: number;
  createdAt: number;
  updatedAt: number;
  revokedAt: number | null;
  expiresAt: number | null;
}

export type KeyStatus = "active" | "revoked" | "expired";

/** Whether a key may be used at `now`; the one rule the admin views and authentication share. */
export function keyStatus(k: KeyRecord, now: number): KeyStatus {
  if (k.revokedAt !== null) return "revoked";
  return k.expiresAt !== null && k.expiresAt <= now ? "expired" : "active";
}

interface KeyRow {
  id: string;
  name: string;
  key_prefix: string;
  plan: Plan;
  per_minute: number | null;
  per_day: number | null;
  version: number;
  created_at: number;
  updated_at: number;
  revoked_at: number | null;
  expires_at: number | null;
}

const KEY_COLUMNS =
  "id, name, key_prefix, plan, per_minute, per_day, version, created_at, updated_at, revoked_at, expires_at";

function toRecord(row: KeyRow): KeyRecord {
  const own =
    row.per_minute !== null && row.per_day !== null
      ? { perMinute: row.per_minute, perDay: row.per_day }
      : null;
  return {
    id: row.id,
    name: row.name,
    prefix: row.key_prefix,
    plan: row.plan,
    limits: limitsOrThrow(row.plan, own),
    version: row.version,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    revokedAt: row.revoked_at,
    expiresAt: row.expires_at,
  };
}

export interface NewKey {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  plan: Plan;
  ownLimits: Limits | null;
  expiresAt: number | null;
  now: number;
}

export function insertKey(db: Queryable, k: NewKey): Promise<KeyRecord> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `INSERT INTO api_keys (id, name, key_hash, key_prefix, plan, per_minute, per_day, created_at, updated_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9) RETURNING ${KEY_COLUMNS}`,
      )
      .bind(
        k.id,
        k.name,
        k.hash,
        k.prefix,
        k.plan,
        k.ownLimits?.perMinute ?? null,
        k.ownLimits?.perDay ?? null,
        k.now,
        k.expiresAt,
      )
      .first<KeyRow>();
    if (!row) throw new Error("INSERT … RETURNING returned no row");
    return toRecord(row);
  });
}

export function findKeyByHash(db: Queryable, hash: string): Promise<KeyRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = ?1`)
      .bind(hash)
      .first<KeyRow>();
    return row && toRecord(row);
  });
}

export function getKey(db: Queryable, id: string): Promise<KeyRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?1`)
      .bind(id)
      .first<KeyRow>();
    return row && toRecord(row);
  });
}

/** Keys in creation order, keyset-paginated by (created_at, id). */
export function listKeys(
  db: Queryable,
  limit: number,
  after?: { createdAt: number; id: string },
): Promise<KeyRecord[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT ${KEY_COLUMNS} FROM api_keys
         WHERE (created_at, id) > (?1, ?2) ORDER BY created_at, id LIMIT ?3`,
      )
      .bind(after?.createdAt ?? -1, after?.id ?? "", limit)
      .all<KeyRow>();
    return results.map(toRecord);
  });
}

export interface KeyChanges {
  name: string;
  plan: Plan;
  ownLimits: Limits | null;
}

export function updateKey(
  db: Queryable,
  id: string,
  c: KeyChanges,
  now: number,
): Promise<KeyRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `UPDATE api_keys SET name = ?2, plan = ?3, per_minute = ?4, per_day = ?5, version = version + 1, updated_at = ?6
         WHERE id = ?1 RETURNING ${KEY_COLUMNS}`,
      )
      .bind(id, c.name, c.plan, c.ownLimits?.perMinute ?? null, c.ownLimits?.perDay ?? null, now)
      .first<KeyRow>();
    return row && toRecord(row);
  });
}

/** Idempotent: a key revoked earlier keeps its first revocation time. */
export function revokeKey(db: Queryable, id: string, now: number): Promise<KeyRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?2), version = version + 1, updated_at = ?2
         WHERE id = ?1 RETURNING ${KEY_COLUMNS}`,
      )
      .bind(id, now)
      .first<KeyRow>();
    return row && toRecord(row);
  });
}
