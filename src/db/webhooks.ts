import { openSecretOrThrow, type SecretBox } from "../lib/sealed-secret";
import type { QueuedDelivery } from "../lib/webhook-events";
import type { WebhookEventType } from "../schemas/webhooks";
import { type AuditEntry, appendAuditIfChangedStatement, appendAuditStatement } from "./audit";
import { guarded, type Queryable } from "./database-error";

/**
 * A webhook endpoint as stored, secrets included (never shown after they are issued). `secret`
 * and `previousSecret` are as D1 holds them: sealed (lib/sealed-secret.ts), or for an endpoint
 * written before secrets were sealed, and until the hourly pass seals them, the secret itself.
 */
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

/** The signing secrets of a delivery, opened, and why any of them could not be. */
export interface SigningSecrets {
  /** The current secret first, then the previous one during its grace period: those that open. */
  secrets: string[];
  /** Each secret that did not open: which one, and why. */
  unopened: { which: "current" | "previous"; reason: string }[];
}

/**
 * The secrets a delivery made at `now` is signed with, opened: the current one, and the one
 * before the last roll while its grace period lasts. One that cannot be opened (sealed under an
 * encryption key since lost) is left out and named in `unopened`, so a roll restores deliveries
 * at once even when the secret it replaced no longer opens.
 */
export async function openSigningSecrets(
  box: SecretBox,
  endpoint: WebhookEndpointRecord,
  now: number,
): Promise<SigningSecrets> {
  const { id, secret, previousSecret, previousSecretExpiresAt } = endpoint;
  const stored: { which: "current" | "previous"; value: string }[] = [
    { which: "current", value: secret },
  ];
  if (previousSecret && previousSecretExpiresAt !== null && previousSecretExpiresAt > now)
    stored.push({ which: "previous", value: previousSecret });
  const result: SigningSecrets = { secrets: [], unopened: [] };
  for (const { which, value } of stored) {
    try {
      result.secrets.push(await openSecretOrThrow(box, id, value));
    } catch (err) {
      result.unopened.push({ which, reason: err instanceof Error ? err.message : String(err) });
    }
  }
  return result;
}

/** An endpoint's stored secrets, as the pass that seals them reads and rewrites them. */
export interface StoredSecrets {
  id: string;
  secret: string;
  previousSecret: string | null;
}

/**
 * At most `limit` endpoints whose secret or previous secret is not sealed under the current key
 * (does not start with `sealedPrefix`): stored before sealing, or under the key before a rotation.
 * In id order, after `afterId`, so a pass can walk past rows it cannot seal.
 */
export function endpointsNotSealedUnder(
  db: Queryable,
  sealedPrefix: string,
  { afterId, limit }: { afterId: string; limit: number },
): Promise<StoredSecrets[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT id, secret, previous_secret AS previousSecret FROM webhook_endpoints
         WHERE id > ?3 AND (substr(secret, 1, length(?1)) != ?1
            OR (previous_secret IS NOT NULL AND substr(previous_secret, 1, length(?1)) != ?1))
         ORDER BY id LIMIT ?2`,
      )
      .bind(sealedPrefix, limit, afterId)
      .all<StoredSecrets>();
    return results;
  });
}

/**
 * Stores `after`'s secrets (the same secrets, sealed anew) if the endpoint still stores
 * `before`'s: a roll in between wins, and the next pass sees its values. Not an operator's change:
 * the version stays, so no concurrent write is refused for it. Whether it was written.
 */
export function replaceStoredSecrets(
  db: Queryable,
  before: StoredSecrets,
  after: StoredSecrets,
): Promise<boolean> {
  return guarded(async () => {
    const { meta } = await db
      .prepare(
        `UPDATE webhook_endpoints SET secret = ?4, previous_secret = ?5
         WHERE id = ?1 AND secret = ?2 AND previous_secret IS ?3`,
      )
      .bind(before.id, before.secret, before.previousSecret, after.secret, after.previousSecret)
      .run();
    return meta.changes > 0;
  });
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

/**
 * Where a delivery stands: waiting for its first attempt, between retries, or done one way or the
 * other; `dead` once its message reached the dead-letter queue (stored as dead_at beside the
 * status, which the release before reads as `failed`).
 */
export type DeliveryStatus = "pending" | "retrying" | "delivered" | "failed" | "skipped" | "dead";

/** The status the log shows: `dead` while dead_at is set, else the stored one. */
const SHOWN_STATUS = "CASE WHEN dead_at IS NULL THEN status ELSE 'dead' END";

/** One event's delivery to one endpoint: the delivery log's row. */
export interface DeliveryRecord {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  keyId: string | null;
  /** The JSON body sent, the same on every attempt. */
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  responseStatus: number | null;
  latencyMs: number | null;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | null;
  nextAttemptAt: number | null;
  /** The token of the chain of messages that carries its attempts; null: queued by the release before. */
  queuedChain: string | null;
}

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  key_id: string | null;
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  response_status: number | null;
  latency_ms: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
  next_attempt_at: number | null;
  queued_chain: string | null;
}

const DELIVERY_COLUMNS = `id, endpoint_id, event_id, event_type, key_id, payload,
  ${SHOWN_STATUS} AS status, attempts, response_status, latency_ms, last_error, created_at, updated_at, delivered_at, next_attempt_at,
  queued_chain`;

function deliveryOf(r: DeliveryRow): DeliveryRecord {
  return {
    id: r.id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    eventType: r.event_type,
    keyId: r.key_id,
    payload: r.payload,
    status: r.status,
    attempts: r.attempts,
    responseStatus: r.response_status,
    latencyMs: r.latency_ms,
    lastError: r.last_error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    deliveredAt: r.delivered_at,
    nextAttemptAt: r.next_attempt_at,
    queuedChain: r.queued_chain,
  };
}

/** A new delivery, before its first attempt. */
export type NewDelivery = Pick<
  DeliveryRecord,
  "id" | "endpointId" | "eventId" | "eventType" | "keyId" | "payload"
>;

/**
 * Adds the deliveries of an event, one per endpoint; an (endpoint, event) pair logged already is
 * left as it is. Claims for queueing, under a new `chain`, those waiting for their first attempt
 * that no message carries: new, released by a failed send, or queued more than REQUEUE_AFTER_MS
 * ago (`requeueBefore`), never a delivered or retrying one. One statement claims them, so of two
 * fan-outs of one event at once only one queues each delivery. Returns the claimed ones.
 */
export function addDeliveries(
  db: Queryable,
  eventId: string,
  deliveries: NewDelivery[],
  { now, requeueBefore, chain }: { now: number; requeueBefore: number; chain: string },
): Promise<QueuedDelivery[]> {
  return guarded(async () => {
    const insert = deliveries.map((d) =>
      db
        .prepare(
          `INSERT OR IGNORE INTO webhook_deliveries (id, endpoint_id, event_id, event_type, key_id,
             payload, status, attempts, created_at, updated_at, next_attempt_at)
           VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?7, ?7, ?7)`,
        )
        .bind(d.id, d.endpointId, d.eventId, d.eventType, d.keyId, d.payload, now),
    );
    const results = await db.batch([
      ...insert,
      db
        .prepare(
          `UPDATE webhook_deliveries SET queued_at = ?2, queued_chain = ?3
           WHERE event_id = ?1 AND status = 'pending' AND attempts = 0 AND dead_at IS NULL
             AND (queued_at IS NULL OR queued_at < ?4)
           RETURNING id`,
        )
        .bind(eventId, now, chain, requeueBefore),
    ]);
    return ((results.at(-1)?.results ?? []) as { id: string }[]).map((r) => ({
      deliveryId: r.id,
      chain,
    }));
  });
}

/**
 * Releases the claim of `chain` on these deliveries (their messages were not sent), so the next
 * fan-out of their event queues them at once.
 */
export function releaseDeliveries(
  db: Queryable,
  claimed: readonly QueuedDelivery[],
): Promise<void> {
  return guarded(async () => {
    if (claimed.length === 0) return;
    await db
      .prepare(
        `UPDATE webhook_deliveries SET queued_at = NULL
         WHERE id IN (SELECT value FROM json_each(?1)) AND queued_chain = ?2`,
      )
      .bind(JSON.stringify(claimed.map((c) => c.deliveryId)), claimed[0]!.chain)
      .run();
  });
}

/** A delivery with its endpoint (null when the endpoint was deleted since). */
export function getDeliveryWithEndpoint(
  db: Queryable,
  id: string,
): Promise<{ delivery: DeliveryRecord; endpoint: WebhookEndpointRecord | null } | null> {
  return guarded(async () => {
    const row = await db
      .prepare(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ?1`)
      .bind(id)
      .first<DeliveryRow>();
    if (!row) return null;
    return { delivery: deliveryOf(row), endpoint: await getEndpoint(db, row.endpoint_id) };
  });
}

/** What one attempt came to. */
export interface AttemptOutcome {
  status: DeliveryStatus;
  responseStatus: number | null;
  latencyMs: number | null;
  error: string | null;
  nextAttemptAt: number | null;
}

/**
 * Records an attempt of delivery `id` at `now` (one more attempt). A delivered one is out of the
 * dead-letter state: its last attempt, finished in the background, may end after its message
 * reached the dead-letter queue.
 */
export function recordAttempt(
  db: Queryable,
  id: string,
  now: number,
  o: AttemptOutcome,
): Promise<void> {
  return guarded(async () => {
    await db
      .prepare(
        `UPDATE webhook_deliveries SET status = ?2, attempts = attempts + 1, response_status = ?3,
           latency_ms = ?4, last_error = ?5, next_attempt_at = ?6, updated_at = ?7,
           delivered_at = CASE WHEN ?2 = 'delivered' THEN ?7 ELSE delivered_at END,
           dead_at = CASE WHEN ?2 = 'delivered' THEN NULL ELSE dead_at END
         WHERE id = ?1`,
      )
      .bind(id, o.status, o.responseStatus, o.latencyMs, o.error, o.nextAttemptAt, now)
      .run();
  });
}

/** Marks delivery `id` as not attempted (its endpoint is disabled), without counting an attempt. */
export function skipDelivery(db: Queryable, id: string, now: number, why: string): Promise<void> {
  return guarded(async () => {
    await db
      .prepare(
        `UPDATE webhook_deliveries SET status = 'skipped', last_error = ?3, next_attempt_at = NULL,
           updated_at = ?2 WHERE id = ?1`,
      )
      .bind(id, now, why)
      .run();
  });
}

/**
 * Sets delivery `id` waiting for an attempt again ("send again"), out of the dead-letter state,
 * carried by the new `chain` from now on (a chain still retrying it is dropped); its attempts stay
 * counted.
 */
export function resetDelivery(
  db: Queryable,
  id: string,
  now: number,
  chain: string,
): Promise<void> {
  return guarded(async () => {
    await db
      .prepare(
        `UPDATE webhook_deliveries SET status = 'pending', dead_at = NULL, next_attempt_at = ?2,
           updated_at = ?2, queued_at = ?2, queued_chain = ?3 WHERE id = ?1`,
      )
      .bind(id, now, chain)
      .run();
  });
}

/**
 * Adds one delivery outside any event fan-out (a test event), carried by `queued.chain` when
 * given.
 */
export function insertDelivery(
  db: Queryable,
  d: NewDelivery,
  now: number,
  queued?: { chain: string },
): Promise<void> {
  return guarded(async () => {
    await db
      .prepare(
        `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, key_id, payload,
           status, attempts, created_at, updated_at, next_attempt_at, queued_at, queued_chain)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?7, ?7, ?7, ?8, ?9)`,
      )
      .bind(
        d.id,
        d.endpointId,
        d.eventId,
        d.eventType,
        d.keyId,
        d.payload,
        now,
        queued ? now : null,
        queued?.chain ?? null,
      )
      .run();
  });
}

export function getDelivery(
  db: Queryable,
  endpointId: string,
  id: string,
): Promise<DeliveryRecord | null> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ?1 AND endpoint_id = ?2`,
      )
      .bind(id, endpointId)
      .first<DeliveryRow>();
    return row ? deliveryOf(row) : null;
  });
}

/** An endpoint's deliveries, newest first, before (createdAt, id) `before`; optionally of one status. */
export function listDeliveries(
  db: Queryable,
  endpointId: string,
  limit: number,
  before: { createdAt: number; id: string } | undefined,
  status: DeliveryStatus | undefined,
): Promise<DeliveryRecord[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
         WHERE endpoint_id = ?1 AND (?2 IS NULL OR ${SHOWN_STATUS} = ?2)
           AND (created_at, id) < (?3, ?4)
         ORDER BY created_at DESC, id DESC LIMIT ?5`,
      )
      .bind(
        endpointId,
        status ?? null,
        before?.createdAt ?? Number.MAX_SAFE_INTEGER,
        before?.id ?? "",
        limit,
      )
      .all<DeliveryRow>();
    return results.map(deliveryOf);
  });
}

/**
 * Records that delivery `id`'s message (of `chain`, if it carried one) reached the dead-letter
 * queue at `now`: `dead` in the log, with nothing scheduled. A delivery delivered or skipped
 * meanwhile, or carried by another chain since ("send again"), is left as it is.
 */
export function markDeliveryDead(
  db: Queryable,
  id: string,
  now: number,
  chain: string | undefined,
): Promise<void> {
  return guarded(async () => {
    await db
      .prepare(
        `UPDATE webhook_deliveries SET dead_at = ?2, status = 'failed', next_attempt_at = NULL,
           updated_at = ?2, last_error = COALESCE(last_error, ?3)
         WHERE id = ?1 AND status NOT IN ('delivered', 'skipped')
           AND (?4 IS NULL OR queued_chain IS NULL OR queued_chain = ?4)`,
      )
      .bind(id, now, "no attempt could be made", chain ?? null)
      .run();
  });
}

/**
 * Disables endpoint `id` because its receiver answered 410 Gone, with a `webhook_disable` entry
 * by `system`; nothing when it is disabled already. Idempotent (a retried delivery).
 */
export function disableGoneEndpoint(
  db: Queryable,
  id: string,
  now: number,
  reason: string,
  audit: AuditEntry,
): Promise<void> {
  return guarded(async () => {
    await db.batch([
      db
        .prepare(
          `UPDATE webhook_endpoints SET disabled_at = ?2, disabled_reason = ?3, updated_at = ?2,
             version = version + 1 WHERE id = ?1 AND disabled_at IS NULL`,
        )
        .bind(id, now, reason),
      appendAuditIfChangedStatement(db, audit),
    ]);
  });
}

/**
 * Keys that expire in (now, until] and have had no key.expiring event for that expiry, at most
 * `limit` of them: the hourly scan's work.
 */
export function keysExpiringWithoutEvent(
  db: Queryable,
  now: number,
  until: number,
  limit: number,
): Promise<{ id: string; expiresAt: number }[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT id, expires_at AS expiresAt FROM api_keys
         WHERE expires_at > ?1 AND expires_at <= ?2 AND revoked_at IS NULL
           AND (expiring_event_for IS NULL OR expiring_event_for != expires_at)
         ORDER BY expires_at LIMIT ?3`,
      )
      .bind(now, until, limit)
      .all<{ id: string; expiresAt: number }>();
    return results;
  });
}
