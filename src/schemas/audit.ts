import { z } from "@hono/zod-openapi";
import { adminPageCursor, isoDay, nameFilter, oneOfError, pageLimit } from "./common";
import { KEY_ID_PATTERN } from "./keys";
import { WEBHOOK_ENDPOINT_ID_PATTERN } from "./webhooks";

export const AUDIT_ACTION_NAMES = [
  "create",
  "update",
  "revoke",
  "roll",
  "disable",
  "enable",
  "unban",
  "ban",
  "ban_end",
  "webhook_create",
  "webhook_update",
  "webhook_delete",
  "webhook_roll_secret",
  "webhook_disable",
] as const;

export const AuditQuerySchema = z.strictObject({
  keyId: z
    .string()
    .regex(KEY_ID_PATTERN, "must be a key id (key_…); an endpoint's entries: endpointId")
    .optional()
    .openapi({ description: "Only entries about this key" }),
  endpointId: z
    .string()
    .regex(WEBHOOK_ENDPOINT_ID_PATTERN, "must be a webhook endpoint id (whe_…)")
    .optional()
    .openapi({
      description: "Only entries about this webhook endpoint (also once deleted); not with keyId",
    }),
  actor: nameFilter()
    .optional()
    .openapi({ description: "Only entries by this actor (an admin token's name, or system)" }),
  action: z
    .enum(AUDIT_ACTION_NAMES, oneOfError(AUDIT_ACTION_NAMES))
    .optional()
    .openapi({ description: "Only entries of this action" }),
  from: isoDay("Only entries from this UTC day on (inclusive)").optional(),
  to: isoDay("Only entries up to this UTC day (inclusive)").optional(),
  limit: pageLimit("Maximum number of entries returned"),
  cursor: adminPageCursor,
});

export const AuditEntrySchema = z
  .object({
    id: z.number().int(),
    at: z.string().openapi({ format: "date-time" }),
    actor: z.string().openapi({
      description:
        "The name of the admin token used, or system for what the service did on its own (automatic bans and their ends, an endpoint disabled because its receiver answered 410)",
    }),
    action: z.enum(AUDIT_ACTION_NAMES),
    keyId: z.string().openapi({
      description:
        "The key the entry is about, or for the webhook_… actions the webhook endpoint (whe_…)",
    }),
    changes: z
      .record(z.string(), z.object({ before: z.unknown(), after: z.unknown() }))
      .openapi({ description: "Changed fields, before → after; never a secret or a hash" }),
    requestId: z.string().openapi({
      description: "The service's own id of the request (the one its log lines carry)",
    }),
    clientRequestId: z.string().nullable().openapi({
      description: "The X-Request-Id the client sent, if any (the client's, not the service's)",
    }),
  })
  .openapi("AuditEntry");

export const AuditPageSchema = z
  .object({ data: z.array(AuditEntrySchema), nextCursor: z.string().nullable() })
  .openapi("AuditPage");
