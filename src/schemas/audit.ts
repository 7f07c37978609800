import { z } from "@hono/zod-openapi";
import { adminPageCursor, pageLimit } from "./common";
import { keyIdString } from "./keys";

export const AUDIT_ACTION_NAMES = [
  "create",
  "update",
  "revoke",
  "roll",
  "disable",
  "enable",
  "unban",
] as const;

export const AuditQuerySchema = z.strictObject({
  keyId: keyIdString().optional().openapi({ description: "Only entries about this key" }),
  limit: pageLimit("Maximum number of entries returned"),
  cursor: adminPageCursor,
});

export const AuditEntrySchema = z
  .object({
    id: z.number().int(),
    at: z.string().openapi({ format: "date-time" }),
    actor: z.string().openapi({ description: "The name of the admin token used" }),
    action: z.enum(AUDIT_ACTION_NAMES),
    keyId: z.string(),
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
