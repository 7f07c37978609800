import type { WebhookEventType } from "../schemas/webhooks";
import { type AuditEntry, appendAuditIfChangedStatement, appendAuditStatement } from "./audit";
import { guarded, type Queryable } from "./database-error";

/** A webhook endpoint as stored, secrets included (never shown after they are issued). */
export interface WebhookEndpointRecord {
  id: string;
  /** null: events about every key. */
  ownerId: string | null;
  url: string;
  eventTypes: WebhookEventType[];
  description: string | null;
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: number | null;
  secretRolledAt: number | null;
  disabledAt: number | null;
  disabledReason: string | null;
  createdAt: number;
  updatedAt: number;
  version: number;
}

/** What an operator may change on an endpoint. */
export type WebhookEndpointSettings = Pick<
  WebhookEndpointRecord,
  "ownerId" | "url" | "eventTypes" | "description" | "disabledAt" | "disabledReason"
>;

interface EndpointRow {
  id: string;
  owner_id: string | null;
  url: string;
  event_types: string;
  description: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  secret_rolled_at: number | null;
  disabled_at: number | null;
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
  version: number;
}

const ENDPOINT_COLUMNS = `id, owner_id, url, event_types, description, secret, previous_secret,
  previous_secret_expires_at, secret_rolled_at, disabled_at, disabled_reason, created_at,
  updated_at, version`;

function endpointOf(r: EndpointRow): WebhookEndpointRecord {
  return {
    id: r.id,
    ownerId: r.owner_id,
    url: r.url,
    eventTypes: JSON.parse(r.event_types) as WebhookEventType[],
    description: r.description,
    secret: r.secret,
    previousSecret: r.previous_secret,
    previousSecretExpiresAt: r.previous_secret_expires_at,
    secretRolledAt: r.secret_rolled_at,
    disabledAt: r.disabled_at,
    disabledReason: r.disabled_reason,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    version: r.version,
  };
}

/**
 * The secrets a delivery made at `now` is signed with: the current one, and the one before the
 * last roll while its grace period lasts.
 */
export function signingSecrets(endpoint: WebhookEndpointRecord, now: number): string[] {
  const { secret, previousSecret, previousSecretExpiresAt } = endpoint;
  return previousSecret && previousSecretExpiresAt !== null && previousSecretExpiresAt > now
    ? [secret, previousSecret]
    : [secret];
}

/** Stores a new endpoint and its audit entry in one batch. */
export function insertEndpoint(
  db: Queryable,
  endpoint: WebhookEndpointRecord,
  audit: AuditEntry,
): Promise<WebhookEndpointRecord> {
  return guarded(async () => {
    const e = endpoint;
    await db.batch([
      db
        .prepare(
          `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS})
           VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)`,
        )
        .bind(
          e.id,
          e.ownerId,
          e.url,
          JSON.stringify(e.eventTypes),
          e.description,
          e.secret,
          e.previousSecret,
          e.previousSecretExpiresAt,
          e.secretRolledAt,
          e.disabledAt,
          e.disabledReason,
          e.createdAt,
          e.updatedAt,
          e.version,
        ),
      appendAuditStatement(db, audit),
    ]);
    return endpoint;
  });
}

export function getEndpoint(db: Queryable, id: string): Promise<WebhookEndpointRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1`)
      .bind(id)
      .first<EndpointRow>();
    return row ? endpointOf(row) : null;
  });
}

/** Endpoints in creation order after `after`, optionally only those of one owner. */
export function listEndpoints(
  db: Queryable,
  limit: number,
  after: { createdAt: number; id: string } | undefined,
  ownerId: string | undefined,
): Promise<WebhookEndpointRecord[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
         WHERE (?1 IS NULL OR owner_id = ?1) AND (created_at, id) > (?2, ?3)
         ORDER BY created_at, id LIMIT ?4`,
      )
      .bind(ownerId ?? null, after?.createdAt ?? -1, after?.id ?? "", limit)
      .all<EndpointRow>();
    return results.map(endpointOf);
  });
}

/**
 * The enabled endpoints an event of `type` about a key of `ownerId` goes to: those of that owner
 * and those for every owner, subscribed to the type.
 */
export function endpointsFor(
  db: Queryable,
  type: string,
  ownerId: string | null,
): Promise<WebhookEndpointRecord[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
         WHERE disabled_at IS NULL AND (owner_id IS NULL OR owner_id = ?1)
           AND EXISTS (SELECT 1 FROM json_each(event_types) WHERE value = ?2)
         ORDER BY created_at, id`,
      )
      .bind(ownerId, type)
      .all<EndpointRow>();
    return results.map(endpointOf);
  });
}

/**
 * Writes `next` over the endpoint if it is still at `version`, with its audit entry, in one
 * batch; null when another write got there first.
 */
export function changeEndpoint(
  db: Queryable,
  id: string,
  version: number,
  next: WebhookEndpointSettings,
  now: number,
  audit: AuditEntry,
): Promise<WebhookEndpointRecord | null> {
  return guarded(async () => {
    const [update] = await db.batch([
      db
        .prepare(
          `UPDATE webhook_endpoints SET owner_id = ?3, url = ?4, event_types = ?5,
             description = ?6, disabled_at = ?7, disabled_reason = ?8, updated_at = ?9,
             version = version + 1
           WHERE id = ?1 AND version = ?2`,
        )
        .bind(
          id,
          version,
          next.ownerId,
          next.url,
          JSON.stringify(next.eventTypes),
          next.description,
          next.disabledAt,
          next.disabledReason,
          now,
        ),
      appendAuditIfChangedStatement(db, audit),
    ]);
    if (!update?.meta.changes) return null;
    return getEndpoint(db, id);
  });
}

/**
 * Makes `secret` the endpoint's signing secret if it is still at `version`; the one before keeps
 * signing until `previousExpiresAt`. With its audit entry; null when another write got there first.
 */
export function rollEndpointSecret(
  db: Queryable,
  id: string,
  version: number,
  { secret, now, previousExpiresAt }: { secret: string; now: number; previousExpiresAt: number },
  audit: AuditEntry,
): Promise<WebhookEndpointRecord | null> {
  return guarded(async () => {
    const [update] = await db.batch([
      db
        .prepare(
          `UPDATE webhook_endpoints SET previous_secret = secret, secret = ?3,
             previous_secret_expires_at = ?4, secret_rolled_at = ?5, updated_at = ?5,
             version = version + 1
           WHERE id = ?1 AND version = ?2`,
        )
        .bind(id, version, secret, previousExpiresAt, now),
      appendAuditIfChangedStatement(db, audit),
    ]);
    if (!update?.meta.changes) return null;
    return getEndpoint(db, id);
  });
}

/** Deletes the endpoint and its delivery log, with the audit entry; false if it did not exist. */
export function deleteEndpoint(db: Queryable, id: string, audit: AuditEntry): Promise<boolean> {
  return guarded(async () => {
    const [deleted] = await db.batch([
      db.prepare("DELETE FROM webhook_endpoints WHERE id = ?1").bind(id),
      appendAuditIfChangedStatement(db, audit),
      db.prepare("DELETE FROM webhook_deliveries WHERE endpoint_id = ?1").bind(id),
    ]);
    return (deleted?.meta.changes ?? 0) > 0;
  });
}
