import { z } from "@hono/zod-openapi";
import { PLANS } from "../quota/plans";
import { DisplayNameSchema, pageLimit } from "./common";

const PlanSchema = z
  .enum(PLANS, { error: "must be one of: free, pro, business, enterprise" })
  .openapi("Plan");

const count = (what: string) =>
  z
    .number({ error: `must be an integer number of requests per ${what}` })
    .int(`must be an integer number of requests per ${what}`)
    .min(1, "must be at least 1")
    .max(Number.MAX_SAFE_INTEGER, "is too large");

const LimitsSchema = z
  .strictObject({ perMinute: count("minute"), perDay: count("day") })
  .openapi("Limits");

const isoDate = z.union([z.iso.datetime({ offset: true }), z.iso.date()], {
  error: "must be an ISO 8601 date or date-time",
});

export const CreateKeySchema = z
  .strictObject({
    name: DisplayNameSchema,
    plan: PlanSchema,
    limits: LimitsSchema.optional(),
    expiresAt: isoDate.optional(),
  })
  .openapi("CreateKey");

export const UpdateKeySchema = z
  .strictObject({
    name: DisplayNameSchema.optional(),
    plan: PlanSchema.optional(),
    limits: LimitsSchema.optional(),
  })
  .refine((b) => Object.keys(b).length > 0, "give at least one of: name, plan, limits")
  .openapi("UpdateKey");

export const KeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z
      .string()
      .openapi({ description: "The first characters of the key, for recognising it" }),
    plan: PlanSchema,
    limits: LimitsSchema,
    status: z.enum(["active", "revoked", "expired"]),
    createdAt: z.string(),
    updatedAt: z.string(),
    revokedAt: z.string().nullable(),
    expiresAt: z.string().nullable(),
  })
  .openapi("Key");

export const CreatedKeySchema = KeySchema.extend({
  key: z.string().openapi({ description: "The secret API key. Shown once, never stored." }),
}).openapi("CreatedKey");

const UsageWindow = z.object({
  count: z.number().int(),
  limit: z.number().int().nullable(),
  resetAt: z.string(),
});

export const KeyDetailSchema = KeySchema.extend({
  usage: z
    .object({ minute: UsageWindow, day: UsageWindow, bannedUntil: z.string().nullable() })
    .nullable()
    .openapi({
      description: "Current usage from the key's quota object; null if it could not be reached",
    }),
}).openapi("KeyDetail");

export const KeyPageSchema = z
  .object({ data: z.array(KeySchema), nextCursor: z.string().nullable() })
  .openapi("KeyPage");

export const ListKeysQuerySchema = z.object({
  limit: pageLimit("Maximum number of keys returned"),
  cursor: z
    .string()
    .max(200)
    .optional()
    .openapi({ description: "nextCursor of the previous page" }),
});

export const KeyIdParamSchema = z.object({
  id: z
    .string()
    .regex(/^key_[0-9A-Za-z]{20}$/, "must be a key id (key_…)")
    .openapi({ param: { name: "id", in: "path" } }),
});
