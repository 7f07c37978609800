import type { Context } from "hono";
import type { AdminVariables } from "../../auth/admin-token";
import type { AuditAction, AuditEntry } from "../../db/audit";
import type { KeyRecord } from "../../db/keys";
import { clock } from "../../lib/clock";
import { cursorSecretsAcceptedOrThrow } from "../../lib/config";
import { ApiError } from "../../lib/errors";
import type { EnvWith } from "../../lib/hono-env";

/** Admin routes see the actor (the admin token's name) that requireAdmin set. */
export type AdminEnv = EnvWith<AdminVariables>;

/** Every admin operation needs an admin token (the securityScheme registered in routes.ts). */
export const security = [{ adminToken: [] }];

/**
 * The CURSOR_SECRETs a signed page cursor is checked against, when one is met (so an unsigned
 * cursor, or none, needs no CURSOR_SECRET).
 */
export const cursorSecrets = (c: Context<AdminEnv>) => () =>
  cursorSecretsAcceptedOrThrow(c.var.config);

export function foundOrThrow(record: KeyRecord | null, id: string): KeyRecord {
  if (!record) throw new ApiError("not_found", `No key with id ${id}.`);
  return record;
}

/**
 * The audit entry of this request's write: now, by this request's admin token, with the
 * service's own request id and, beside it, the client's X-Request-Id if it sent one.
 */
export function auditOf(
  c: Context<AdminEnv>,
  action: AuditAction,
  keyId: string,
  changes: AuditEntry["changes"] = {},
): AuditEntry {
  return {
    at: clock.now(),
    actor: c.var.adminActor,
    action,
    keyId,
    changes,
    requestId: c.var.requestId,
    clientRequestId: c.var.clientRequestId ?? null,
  };
}
