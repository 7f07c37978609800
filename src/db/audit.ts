import { isoTime } from "../lib/clock";
import type { AUDIT_ACTION_NAMES } from "../schemas/audit";
import { guarded, type Queryable } from "./database-error";

export type AuditAction = (typeof AUDIT_ACTION_NAMES)[number];

/** A changed field, as the admin views show it: before → after (never a secret or a hash). */
export type FieldChanges = Record<string, { before: unknown; after: unknown }>;

/** One admin write: when, who (the admin token's name), what, to which key, and in which request. */
export interface AuditEntry {
  at: number;
  actor: string;
  action: AuditAction;
  keyId: string;
  changes: FieldChanges;
  /** The service's own id of the request. */
  requestId: string;
  /** The X-Request-Id the client sent, if any: the client's, not the service's. */
  clientRequestId: string | null;
}

export interface StoredAuditEntry extends AuditEntry {
  id: number;
}

const INSERT_AUDIT = `INSERT INTO audit_log (at, actor, action, key_id, changes, request_id, client_request_id)`;

/** The statement that appends `entry`; run it in the same batch as the change it records. */
export function appendAuditStatement(db: Queryable, entry: AuditEntry): D1PreparedStatement {
  return db
    .prepare(`${INSERT_AUDIT} VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`)
    .bind(...auditValues(entry));
}

/**
 * Appends `entry` only if the statement just before it in the batch changed a row (SQLite's
 * `changes()`): a conditional write that lost a race leaves no entry for a change never made.
 */
export function appendAuditIfChangedStatement(
  db: Queryable,
  entry: AuditEntry,
): D1PreparedStatement {
  return db
    .prepare(`${INSERT_AUDIT} SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE changes() = 1`)
    .bind(...auditValues(entry));
}

/**
 * Appends `entry` on its own, for a change made outside D1 (an unban in the key's object), with
 * any `alongside` statements in the same batch.
 */
export function appendAudit(
  db: Queryable,
  entry: AuditEntry,
  alongside: D1PreparedStatement[] = [],
): Promise<void> {
  return guarded(async () => {
    await db.batch([...alongside, appendAuditStatement(db, entry)]);
  });
}

function auditValues(e: AuditEntry) {
  return [
    e.at,
    e.actor,
    e.action,
    e.keyId,
    JSON.stringify(e.changes),
    e.requestId,
    e.clientRequestId,
  ] as const;
}

interface AuditRow {
  id: number;
  at: number;
  actor: string;
  action: AuditAction;
  key_id: string;
  changes: string;
  request_id: string;
  client_request_id: string | null;
}

/** What the audit trail can be narrowed to; `from`/`until` bound `at` (epoch ms, until exclusive). */
export interface AuditFilters {
  keyId?: string;
  actor?: string;
  action?: AuditAction;
  from?: number;
  until?: number;
}

/** Entries newest first, optionally filtered, keyset-paginated by id (entries before `beforeId`). */
export function listAudit(
  db: Queryable,
  { limit, beforeId, ...filters }: AuditFilters & { limit: number; beforeId?: number },
): Promise<StoredAuditEntry[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT id, at, actor, action, key_id, changes, request_id, client_request_id FROM audit_log
         WHERE (?1 IS NULL OR key_id = ?1) AND (?4 IS NULL OR actor = ?4)
           AND (?5 IS NULL OR action = ?5) AND (?6 IS NULL OR at >= ?6) AND (?7 IS NULL OR at < ?7)
           AND id < ?2 ORDER BY id DESC LIMIT ?3`,
      )
      .bind(
        filters.keyId ?? null,
        beforeId ?? Number.MAX_SAFE_INTEGER,
        limit,
        filters.actor ?? null,
        filters.action ?? null,
        filters.from ?? null,
        filters.until ?? null,
      )
      .all<AuditRow>();
    return results.map((r) => ({
      id: r.id,
      at: r.at,
      actor: r.actor,
      action: r.action,
      keyId: r.key_id,
      changes: JSON.parse(r.changes) as FieldChanges,
      requestId: r.request_id,
      clientRequestId: r.client_request_id,
    }));
  });
}

/** The actor of entries the service writes on its own (automatic bans and their ends). */
export const SYSTEM_ACTOR = "system";

/**
 * Appends `entry` unless an entry with the same key, action and request id exists: for writes a
 * Durable Object may repeat after a failure (its request id names the event, not a request).
 */
function appendAuditOnceStatement(db: Queryable, entry: AuditEntry): D1PreparedStatement {
  return db
    .prepare(
      `${INSERT_AUDIT} SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE NOT EXISTS (
         SELECT 1 FROM audit_log WHERE key_id = ?4 AND action = ?3 AND request_id = ?6)`,
    )
    .bind(...auditValues(entry));
}

/**
 * Records an automatic ban of key `keyId` from `startedAt` until `until` (epoch ms): the key's
 * banned_until, and a `ban` entry by `system`. Idempotent (the key's object retries it).
 */
export function recordBanStart(
  db: Queryable,
  keyId: string,
  { startedAt, until }: { startedAt: number; until: number },
): Promise<void> {
  return guarded(async () => {
    await db.batch([
      db
        .prepare("UPDATE api_keys SET banned_until = ?2 WHERE id = ?1 AND revoked_at IS NULL")
        .bind(keyId, until),
      appendAuditOnceStatement(db, {
        at: startedAt,
        actor: SYSTEM_ACTOR,
        action: "ban",
        keyId,
        changes: { bannedUntil: { before: null, after: isoTime(until) } },
        requestId: `ban:${keyId}:${until}`,
        clientRequestId: null,
      }),
    ]);
  });
}

/** Records that the ban until `until` has ended (a `ban_end` entry by `system`). Idempotent. */
export function recordBanEnd(db: Queryable, keyId: string, until: number): Promise<void> {
  return guarded(async () => {
    await db.batch([
      db
        .prepare("UPDATE api_keys SET banned_until = NULL WHERE id = ?1 AND banned_until = ?2")
        .bind(keyId, until),
      appendAuditOnceStatement(db, {
        at: until,
        actor: SYSTEM_ACTOR,
        action: "ban_end",
        keyId,
        changes: { bannedUntil: { before: isoTime(until), after: null } },
        requestId: `ban-end:${keyId}:${until}`,
        clientRequestId: null,
      }),
    ]);
  });
}

/** The statement that forgets a key's ban in D1 (an operator lifted it). */
export function clearBanStatement(db: Queryable, keyId: string): D1PreparedStatement {
  return db.prepare("UPDATE api_keys SET banned_until = NULL WHERE id = ?1").bind(keyId);
}
