import { type Limits, limitsOrThrow, type Plan } from "../quota/plans";
import type { Policy } from "../quota/windows";
import type { KEY_STATE_NAMES } from "../schemas/keys";
import { isRegion, type Region } from "../schemas/region";
import { type AuditEntry, appendAuditIfChangedStatement, appendAuditStatement } from "./audit";
import { guarded, type Queryable } from "./database-error";

/** Operator-defined data about a key: a JSON object of at most 2 KiB. */
export type KeyMeta = Record<string, unknown>;

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
  disabledAt: number | null;
  ownerId: string | null;
  meta: KeyMeta | null;
  /** Where the key's quota object is created (a location hint); null: near its first request. */
  region: Region | null;
  rolledAt: number | null;
  /** Until when the secret replaced by the last roll still authenticates (null: never rolled). */
  previousSecretExpiresAt: number | null;
  /**
   * When the key's quota object was first asked to decide a request of the key (`markKeyUsed`);
   * null: never, so the object does not exist and a read of the key's usage needs no object.
   */
  firstUsedAt: number | null;
  /**
   * Until when the key's quota object has banned it, as its alarm recorded in D1 (null: no ban
   * recorded); a copy of the key brings a ban to a location holder whose push was lost.
   */
  bannedUntil: number | null;
}

/**
 * How long a copy of a key record read from D1 is used before it is read again, at most: an
 * isolate's key cache and a location holder's copy alike. It bounds how long a change the key's
 * quota object never learnt (its push failed) can go unseen.
 */
export const KEY_RECORD_MAX_AGE_MS = 30_000;

/**
 * What a key's quota object enforces for it: the key's limits and version, and whether it is
 * refused outright. A disabled key is refused like a revoked one (the object knows no
 * difference); enabling it pushes a newer version that is not refused.
 */
export function policyOf(key: KeyRecord): Policy {
  return {
    ...key.limits,
    version: key.version,
    revoked: key.revokedAt !== null || key.disabledAt !== null,
  };
}

export type KeyStatus = (typeof KEY_STATE_NAMES)[number];

/**
 * Whether a key may be used at `now`; the one rule the admin views, the list filter and
 * authentication share. Revoked wins over disabled, disabled over expired.
 */
export function keyStatus(k: KeyRecord, now: number): KeyStatus {
  if (k.revokedAt !== null) return "revoked";
  if (k.disabledAt !== null) return "disabled";
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
  disabled_at: number | null;
  owner_id: string | null;
  meta: string | null;
  region: string | null;
  rolled_at: number | null;
  previous_key_expires_at: number | null;
  first_used_at: number | null;
  banned_until: number | null;
}

const KEY_COLUMNS =
  "id, name, key_prefix, plan, per_minute, per_day, version, created_at, updated_at, revoked_at, expires_at, disabled_at, owner_id, meta, region, rolled_at, previous_key_expires_at, first_used_at, banned_until";

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
    disabledAt: row.disabled_at,
    ownerId: row.owner_id,
    meta: row.meta === null ? null : (JSON.parse(row.meta) as KeyMeta),
    // Only listed regions are written; one no longer listed places nothing.
    region: isRegion(row.region) ? row.region : null,
    rolledAt: row.rolled_at,
    previousSecretExpiresAt: row.previous_key_expires_at,
    firstUsedAt: row.first_used_at,
    bannedUntil: row.banned_until,
  };
}

const metaText = (meta: KeyMeta | null | undefined) =>
  meta === null || meta === undefined ? null : JSON.stringify(meta);

export interface NewKey {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  plan: Plan;
  ownLimits: Limits | null;
  expiresAt: number | null;
  ownerId?: string | null;
  meta?: KeyMeta | null;
  region?: Region | null;
  now: number;
}

/** Inserts a key; with `audit`, appends that entry in the same batch (both or neither). */
export function insertKey(db: Queryable, k: NewKey, audit?: AuditEntry): Promise<KeyRecord> {
  return guarded(async () => {
    const insert = db
      .prepare(
        `INSERT INTO api_keys (id, name, key_hash, key_prefix, plan, per_minute, per_day, created_at, updated_at, expires_at, owner_id, meta, region)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12) RETURNING ${KEY_COLUMNS}`,
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
        k.ownerId ?? null,
        metaText(k.meta),
        k.region ?? null,
      );
    const [inserted] = await db.batch<KeyRow>(
      audit ? [insert, appendAuditStatement(db, audit)] : [insert],
    );
    const row = inserted?.results[0];
    if (!row) throw new Error("INSERT … RETURNING returned no row");
    return toRecord(row);
  });
}

/**
 * Which secret of a key a hash belongs to: the current one, the one the last roll replaced, or
 * one an earlier roll retired (it never authenticates again).
 */
export interface KeyMatch {
  record: KeyRecord;
  secret: "current" | "previous" | "retired";
}

/**
 * Whether the secret that found `match` may be used at `now`: the key's status, or for a secret a
 * roll replaced, "rolled" once its grace period is over, and "retired" for one a later roll
 * retired. The one rule the Worker and the location holders authenticate by.
 */
export function secretStatus(match: KeyMatch, now: number): KeyStatus | "rolled" | "retired" {
  const status = keyStatus(match.record, now);
  if (status !== "active" || match.secret === "current") return status;
  if (match.secret === "retired") return "retired";
  const graceEnd = match.record.previousSecretExpiresAt;
  return graceEnd !== null && now < graceEnd ? "active" : "rolled";
}

/** The key whose current, previous (rolled) or retired secret has this SHA-256 hash, in one query. */
export function findKeyByHash(db: Queryable, hash: string): Promise<KeyMatch | null> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `SELECT ${KEY_COLUMNS}, CASE WHEN key_hash = ?1 THEN 'current' ELSE 'previous' END AS secret
           FROM api_keys WHERE key_hash = ?1 OR previous_key_hash = ?1
         UNION ALL
         SELECT ${KEY_COLUMNS}, 'retired' AS secret FROM api_keys
           WHERE id = (SELECT key_id FROM retired_key_secrets WHERE key_hash = ?1)
         LIMIT 1`,
      )
      .bind(hash)
      .first<KeyRow & { secret: KeyMatch["secret"] }>();
    return row && { record: toRecord(row), secret: row.secret };
  });
}

/**
 * Records that the key's quota object is asked to decide one of its requests, unless an earlier
 * request did: `first_used_at` is set once and never moves (the version is not bumped: it is not
 * a change to the key). Returns the key as D1 has it after the write, null if it is gone.
 */
export function markKeyUsed(db: Queryable, id: string, now: number): Promise<KeyRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `UPDATE api_keys SET first_used_at = COALESCE(first_used_at, ?2) WHERE id = ?1
         RETURNING ${KEY_COLUMNS}`,
      )
      .bind(id, now)
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

/** The keys of `ids` (at most 100), in no particular order; an unknown id is left out. */
export function getKeys(db: Queryable, ids: readonly string[]): Promise<KeyRecord[]> {
  if (!ids.length) return Promise.resolve([]);
  return guarded(async () => {
    const { results } = await db
      .prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id IN (${ids.map(() => "?").join(", ")})`)
      .bind(...ids)
      .all<KeyRow>();
    return results.map(toRecord);
  });
}

// A search that starts like a secret (what a consumer reads out) also looks at the secrets' prefixes.
const SECRET_START = /^pet_(live|test)_./;

/** The key list's state filter: a key's status, or `banned` (an automatic ban D1 has heard of). */
export type KeyListState = KeyStatus | "banned";

/**
 * What the key list can be narrowed to. `search` matches, case-sensitively, the start of the name;
 * one that starts like a secret (pet_live_…, pet_test_… and more: what a consumer reads out) also
 * the start of the secret's shown prefix (the query schema keeps it within that prefix).
 */
export interface KeyFilters {
  plan?: Plan;
  state?: KeyListState;
  ownerId?: string;
  search?: string;
  /** The time `state` is judged at (expiry). */
  now?: number;
}

// keyStatus() as SQL, for the state filter (`?` is the time the state is judged at).
const STATE_CONDITIONS: Record<KeyListState, { sql: string; atTime: boolean }> = {
  banned: {
    sql: "revoked_at IS NULL AND disabled_at IS NULL AND banned_until IS NOT NULL AND banned_until > ?",
    atTime: true,
  },
  revoked: { sql: "revoked_at IS NOT NULL", atTime: false },
  disabled: { sql: "revoked_at IS NULL AND disabled_at IS NOT NULL", atTime: false },
  expired: {
    sql: "revoked_at IS NULL AND disabled_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ?",
    atTime: true,
  },
  active: {
    sql: "revoked_at IS NULL AND disabled_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
    atTime: true,
  },
};

/** Keys in creation order, keyset-paginated by (created_at, id), optionally filtered. */
export function listKeys(
  db: Queryable,
  limit: number,
  after?: { createdAt: number; id: string },
  filters: KeyFilters = {},
): Promise<KeyRecord[]> {
  return guarded(async () => {
    // D1 wants exactly as many bindings as the query has placeholders: add both together.
    const conditions = ["(created_at, id) > (?, ?)"];
    const bindings: unknown[] = [after?.createdAt ?? -1, after?.id ?? ""];
    const where = (sql: string, ...values: unknown[]) => {
      conditions.push(sql);
      bindings.push(...values);
    };
    if (filters.plan) where("plan = ?", filters.plan);
    if (filters.state) {
      const { sql, atTime } = STATE_CONDITIONS[filters.state];
      if (atTime) where(sql, filters.now ?? 0);
      else where(sql);
    }
    if (filters.ownerId !== undefined) where("owner_id = ?", filters.ownerId);
    const { search } = filters;
    if (search !== undefined && !SECRET_START.test(search))
      where("substr(name, 1, length(?)) = ?", search, search);
    else if (search !== undefined)
      where(
        "(substr(name, 1, length(?)) = ? OR substr(key_prefix, 1, length(?)) = ?)",
        ...Array(4).fill(search),
      );
    const { results } = await db
      .prepare(
        `SELECT ${KEY_COLUMNS} FROM api_keys
         WHERE ${conditions.join(" AND ")} ORDER BY created_at, id LIMIT ?`,
      )
      .bind(...bindings, limit)
      .all<KeyRow>();
    return results.map(toRecord);
  });
}

/** Everything an operator can change about a key, as it should be after the change. */
export interface KeySettings {
  name: string;
  plan: Plan;
  ownLimits: Limits | null;
  expiresAt: number | null;
  disabledAt: number | null;
  revokedAt: number | null;
  ownerId: string | null;
  meta: KeyMeta | null;
  region: Region | null;
}

/** A key's current settings, the starting point of a change. */
export const settingsOf = (k: KeyRecord): KeySettings => ({
  name: k.name,
  plan: k.plan,
  ownLimits: k.plan === "enterprise" ? k.limits : null,
  expiresAt: k.expiresAt,
  disabledAt: k.disabledAt,
  revokedAt: k.revokedAt,
  ownerId: k.ownerId,
  meta: k.meta,
  region: k.region,
});

/**
 * Writes `next` over the key if it is still at `expectedVersion`, bumping the version, and
 * appends `audit` in the same batch, then `alongside` (a webhook event kept if the change was
 * written: outboxEventIfChangedStatement). Null if the key is gone or another change came first
 * (re-read it and decide again): a change is never made on top of one its author did not see.
 */
export function changeKey(
  db: Queryable,
  id: string,
  expectedVersion: number,
  next: KeySettings,
  audit: AuditEntry,
  alongside: D1PreparedStatement[] = [],
): Promise<KeyRecord | null> {
  return guarded(async () => {
    const update = db
      .prepare(
        `UPDATE api_keys SET name = ?3, plan = ?4, per_minute = ?5, per_day = ?6, expires_at = ?7,
           disabled_at = ?8, revoked_at = ?9, owner_id = ?10, meta = ?11, region = ?13,
           version = version + 1, updated_at = ?12
         WHERE id = ?1 AND version = ?2 RETURNING ${KEY_COLUMNS}`,
      )
      .bind(
        id,
        expectedVersion,
        next.name,
        next.plan,
        next.ownLimits?.perMinute ?? null,
        next.ownLimits?.perDay ?? null,
        next.expiresAt,
        next.disabledAt,
        next.revokedAt,
        next.ownerId,
        metaText(next.meta),
        audit.at,
        next.region,
      );
    const [updated] = await db.batch<KeyRow>([
      update,
      appendAuditIfChangedStatement(db, audit),
      ...alongside,
    ]);
    const row = updated?.results[0];
    return row ? toRecord(row) : null;
  });
}

/**
 * Gives the key a new secret (`hash`, shown as `prefix`) if it is still at `expectedVersion`;
 * the old secret's hash is kept as the previous one, valid until `previousExpiresAt`, and the
 * previous one before it is retired (recognised, never accepted). Appends `audit` in the same
 * batch, then `alongside` (as changeKey). Null if the key is gone or another change came first.
 */
export function rollKeySecret(
  db: Queryable,
  id: string,
  expectedVersion: number,
  secret: { hash: string; prefix: string; previousExpiresAt: number },
  audit: AuditEntry,
  alongside: D1PreparedStatement[] = [],
): Promise<KeyRecord | null> {
  return guarded(async () => {
    const update = db
      .prepare(
        `UPDATE api_keys SET previous_key_hash = key_hash, previous_key_expires_at = ?5,
           key_hash = ?3, key_prefix = ?4, rolled_at = ?6, version = version + 1, updated_at = ?6
         WHERE id = ?1 AND version = ?2 AND revoked_at IS NULL RETURNING ${KEY_COLUMNS}`,
      )
      .bind(id, expectedVersion, secret.hash, secret.prefix, secret.previousExpiresAt, audit.at);
    // Runs first, under the update's own conditions, so it retires a secret only when the roll happens.
    const retire = db
      .prepare(
        `INSERT OR IGNORE INTO retired_key_secrets (key_hash, key_id, retired_at)
         SELECT previous_key_hash, id, ?3 FROM api_keys
         WHERE id = ?1 AND version = ?2 AND revoked_at IS NULL AND previous_key_hash IS NOT NULL`,
      )
      .bind(id, expectedVersion, audit.at);
    const [, updated] = await db.batch<KeyRow>([
      retire,
      update,
      appendAuditIfChangedStatement(db, audit),
      ...alongside,
    ]);
    const row = updated?.results[0];
    return row ? toRecord(row) : null;
  });
}
