import { z } from "@hono/zod-openapi";
import { dayName, dayStartOf } from "../lib/clock";
import { PLANS } from "../quota/plans";
import { adminPageCursor, pageLimit } from "./common";

/** A calendar date YYYY-MM-DD that exists (2030-02-30 does not). */
function isoDay(description: string) {
  return z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date YYYY-MM-DD")
    .refine((d) => {
      const at = dayStartOf(d);
      return Number.isFinite(at) && dayName(at) === d;
    }, "must be a real calendar date")
    .openapi({ type: "string", format: "date", description, example: "2030-06-10" });
}

/** The longest range GET /keys/{id}/usage answers, in days. */
export const MAX_USAGE_DAYS = 400;

export const KeyUsageQuerySchema = z.strictObject({
  from: isoDay("First day (UTC), inclusive; default 29 days before `to`").optional(),
  to: isoDay("Last day (UTC), inclusive; default today").optional(),
});

const Refused = z
  .object({
    rate_limited: z.number().int(),
    quota_exceeded: z.number().int(),
    key_banned: z.number().int(),
  })
  .openapi("RefusedCounts");

export const UsageDaySchema = z
  .object({
    day: z.string().openapi({ format: "date" }),
    admitted: z.number().int(),
    refused: Refused,
  })
  .openapi("UsageDay");

export const KeyUsageHistorySchema = z
  .object({ data: z.array(UsageDaySchema) })
  .openapi("KeyUsageHistory");

export const DayUsageQuerySchema = z.strictObject({
  day: isoDay("The UTC day"),
  limit: pageLimit("Maximum number of keys returned"),
  cursor: adminPageCursor,
});

export const KeyDayTotalsSchema = UsageDaySchema.extend({
  keyId: z.string(),
  name: z.string(),
  plan: z.enum(PLANS),
  ownerId: z.string().nullable(),
}).openapi("KeyDayTotals");

export const DayUsagePageSchema = z
  .object({ data: z.array(KeyDayTotalsSchema), nextCursor: z.string().nullable() })
  .openapi("DayUsagePage");
