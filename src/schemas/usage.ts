import { z } from "@hono/zod-openapi";
import { PLANS } from "../quota/plans";
import { adminPageCursor, isoDay, pageLimit } from "./common";

/** The longest range GET /keys/{id}/usage answers, in days. */
export const MAX_USAGE_DAYS = 400;
/** The range GET /keys/{id}/usage answers without `from`: this many days, up to `to`. */
export const DEFAULT_USAGE_DAYS = 30;

export const KeyUsageQuerySchema = z.strictObject({
  from: isoDay(
    `First day (UTC), inclusive, not after today; default ${DEFAULT_USAGE_DAYS - 1} days before \`to\``,
  ).optional(),
  to: isoDay("Last day (UTC), inclusive, not after today; default today").optional(),
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
    admitted: z.number().int().openapi({
      description:
        "Requests admitted and served (what an invoice counts); requests admitted from a lease of permits count once their holder reports them used",
    }),
    refused: Refused,
    stranded: z.number().int().openapi({
      description:
        "Permits leased that day to an isolate or a location holder and never reported used (lost with it): not requests, never billed",
    }),
  })
  .openapi("UsageDay");

export const KeyUsageHistorySchema = z
  .object({ data: z.array(UsageDaySchema) })
  .openapi("KeyUsageHistory");

export const DayUsageQuerySchema = z.strictObject({
  day: isoDay("The UTC day: today or a day before"),
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
  .object({
    data: z.array(KeyDayTotalsSchema),
    nextCursor: z.string().nullable(),
    asOf: z.string().nullable().openapi({
      format: "date-time",
      description:
        "While the day is not over: when these running totals were read from the keys' quota objects (they are the day so far). null once the day is over: its totals are final.",
    }),
  })
  .openapi("DayUsagePage");

const QuotaWindowSchema = z
  .object({
    limit: z.number().int().openapi({ description: "Requests allowed in the window" }),
    used: z.number().int().openapi({ description: "Requests counted in the window so far" }),
    remaining: z.number().int().openapi({ description: "limit − used, never below 0" }),
    resetAt: z.string().openapi({ format: "date-time", description: "When the window resets" }),
  })
  .openapi("QuotaWindow");

/** How many days of history GET /v1/usage returns (today and the days before it). */
export const OWN_USAGE_DAYS = 30;

export const OwnUsageSchema = z
  .object({
    key: z
      .object({
        id: z.string(),
        name: z.string(),
        prefix: z
          .string()
          .openapi({ description: "The first characters of the secret, for recognising it" }),
        expiresAt: z
          .string()
          .nullable()
          .openapi({ format: "date-time", description: "When the key stops working; null: never" }),
      })
      .openapi({ description: "The key this request authenticated with" }),
    plan: z.enum(PLANS),
    limits: z
      .object({ perMinute: z.number().int(), perDay: z.number().int() })
      .openapi({ description: "The limits in force (the plan's, or the key's own)" }),
    windows: z.object({ minute: QuotaWindowSchema, day: QuotaWindowSchema }).openapi({
      description: "The fixed UTC windows: the current minute, and the day from 00:00 UTC",
    }),
    ban: z
      .object({
        until: z
          .string()
          .openapi({ format: "date-time", description: "When the temporary ban ends" }),
      })
      .nullable()
      .openapi({
        description:
          "A temporary ban (for requests sent on after 429 answers), during which every request is refused; null when none",
      }),
    days: z.array(UsageDaySchema).openapi({
      description: `The last ${OWN_USAGE_DAYS} UTC days, oldest first and today last, zeros where nothing happened`,
    }),
  })
  .openapi("Usage");
