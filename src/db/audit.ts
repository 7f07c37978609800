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

/** Appends `entry` on its own, for a change made outside D1 (an unban in the key's object). */
export function appendAudit(db: Queryable, entry: AuditEntry): Promise<void> {
  return guarded(async () => {
    await appendAuditStatement(db, entry).run();
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

/** Entries newest first, optionally of one key, keyset-paginated by id (entries before `beforeId`). */
export function listAudit(
  db: Queryable,
  { keyId, limit, beforeId }: { keyId?: string; limit: number; beforeId?: number },
): Promise<StoredAuditEntry[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT id, at, actor, action, key_id, changes, request_id, client_request_id FROM audit_log
         WHERE (?1 IS NULL OR key_id = ?1) AND id < ?2 ORDER BY id DESC LIMIT ?3`,
      )
      .bind(keyId ?? null, beforeId ?? Number.MAX_SAFE_INTEGER, limit)
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
