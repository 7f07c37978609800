import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { listAudit } from "../../db/audit";
import { getKey, getKeys } from "../../db/keys";
import {
  everyDay,
  type KeyDayTotals,
  listUsageOfDay,
  readUsageDays,
  type UsageDay,
} from "../../db/usage-history";
import { clock, DAY_MS, dayName, dayStartOf, isoTime, MINUTE_MS } from "../../lib/clock";
import { ApiError } from "../../lib/errors";
import { validationHook } from "../../middleware/validation-hook";
import { AuditPageSchema, AuditQuerySchema } from "../../schemas/audit";
import { adminErrorResponses } from "../../schemas/common";
import { KeyIdParamSchema } from "../../schemas/keys";
import {
  DayUsagePageSchema,
  DayUsageQuerySchema,
  DEFAULT_USAGE_DAYS,
  KeyUsageHistorySchema,
  KeyUsageQuerySchema,
  MAX_USAGE_DAYS,
} from "../../schemas/usage";
import { type AdminEnv, cursorSecrets, foundOrThrow, security } from "./admin-env";
import { adminKeyQuota, listedKeyReportOrThrow } from "./key-quota";
import { auditEntryView, decodeCursorOrThrow, pageOf, toCsv, wantsCsv } from "./key-views";

/** JSON, or CSV when the client sends `Accept: text/csv`. */
const jsonOrCsv = <T>(schema: T) => ({
  "application/json": { schema },
  "text/csv": {
    schema: z.string().openapi({ description: "The same rows as CSV, with a header row" }),
  },
});

/**
 * 400 unless the day `day` (the parameter `name`) has begun: a day after today (UTC) has no usage
 * yet, and zeros for it, or "the day so far", would read as a fact.
 */
function begunOrThrow(name: string, day: string | undefined, now: number): void {
  const today = dayName(now);
  if (day !== undefined && day > today)
    throw new ApiError(
      "invalid_request",
      `${name}: must not be after today (${day} > ${today}, the current UTC day).`,
    );
}

/**
 * from/to as given, defaulting to DEFAULT_USAGE_DAYS up to today; 400 for a day after today, or a
 * reversed or too long range.
 */
function rangeOrThrow(query: { from?: string; to?: string }, now: number) {
  begunOrThrow("from", query.from, now);
  begunOrThrow("to", query.to, now);
  const to = query.to ?? dayName(now);
  const from = query.from ?? dayName(dayStartOf(to) - (DEFAULT_USAGE_DAYS - 1) * DAY_MS);
  const days = (dayStartOf(to) - dayStartOf(from)) / DAY_MS + 1;
  if (days < 1)
    throw new ApiError("invalid_request", `from: must not be after to (${from} > ${to}).`);
  if (days > MAX_USAGE_DAYS)
    throw new ApiError(
      "invalid_request",
      `from, to: the range may span at most ${MAX_USAGE_DAYS} days (got ${days}).`,
    );
  return { from, to };
}

/** The usage CSV's columns, each with its cell of a day: a column is named and filled in one place. */
const USAGE_CSV: readonly (readonly [column: string, cell: (d: UsageDay) => unknown])[] = [
  ["day", (d) => d.day],
  ["admitted", (d) => d.admitted],
  ["rate_limited", (d) => d.refused.rate_limited],
  ["quota_exceeded", (d) => d.refused.quota_exceeded],
  ["key_banned", (d) => d.refused.key_banned],
  ["stranded", (d) => d.stranded],
];
const USAGE_COLUMNS = USAGE_CSV.map(([column]) => column);
const usageCells = (d: UsageDay) => USAGE_CSV.map(([, cell]) => cell(d));

/**
 * How long after a day ends the day listing still reads it from the keys' quota objects rather
 * than from D1 alone: an object writes a finished day to D1 a minute after the day ends, and tries
 * again 5 minutes later if D1 failed.
 */
const HELD_AFTER_DAY_END_MS = 10 * MINUTE_MS;

/**
 * `rows` (one day's D1 totals) with each key's totals as its quota object holds them, where it
 * holds that day: today's, and a finished day's until the object has written it to D1. One call
 * per listed key (at most a page's), none to a location holder; unreachable: throws 503.
 */
async function withHeldTotalsOrThrow(
  env: Env,
  day: string,
  rows: KeyDayTotals[],
): Promise<KeyDayTotals[]> {
  const records = new Map(
    (
      await getKeys(
        env.DB,
        rows.map((r) => r.keyId),
      )
    ).map((k) => [k.id, k]),
  );
  const held = await Promise.all(
    rows.map(async (r) => {
      const record = records.get(r.keyId);
      if (!record) return undefined;
      const { days } = await listedKeyReportOrThrow(env, record);
      return days.find((d) => d.day === day);
    }),
  );
  return rows.map((r, i) => ({ ...r, ...held[i] }));
}

function csvResponse(c: Context, text: string, headers: Record<string, string> = {}) {
  return c.body(text, 200, { "Content-Type": "text/csv; charset=utf-8", ...headers });
}

export const historyApi = new OpenAPIHono<AdminEnv>({ defaultHook: validationHook })
  .openapi(
    createRoute({
      method: "get",
      path: "/keys/{id}/usage",
      operationId: "getKeyUsage",
      tags: ["Usage"],
      summary: "A key's usage per day",
      description: `A key's requests per UTC day, admitted and refused by reason: every day from \`from\` to \`to\` (at most ${MAX_USAGE_DAYS}), oldest first, with zeros where nothing happened. Today is read live from the key's quota object. JSON, or CSV with \`Accept: text/csv\`. 400 for a day after today (UTC), or a reversed or too long range; 404 if no key has this id.`,
      security,
      request: { params: KeyIdParamSchema, query: KeyUsageQuerySchema },
      responses: {
        200: { description: "One entry per day", content: jsonOrCsv(KeyUsageHistorySchema) },
        ...adminErrorResponses(400, 401, 404, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const { from, to } = rangeOrThrow(c.req.valid("query"), clock.now());
      const record = foundOrThrow(await getKey(c.env.DB, id), id);
      // The object's days win: it holds today, and any finished day D1 did not take yet. So
      // D1 is read at the same time as the object writes its days there: a stale stored day
      // is replaced by the object's.
      const [live, stored] = await Promise.all([
        adminKeyQuota(c.env, c.req.raw, record).saveUsageHistoryOrThrow(),
        readUsageDays(c.env.DB, id, from, to),
      ]);
      // Later entries win in everyDay: the live ones go last.
      const days = everyDay(from, to, [...stored, ...live]);
      if (wantsCsv(c.req.header("Accept")))
        return csvResponse(c, toCsv(USAGE_COLUMNS, days.map(usageCells)));
      return c.json({ data: days }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/usage",
      operationId: "listUsageOfDay",
      tags: ["Usage"],
      summary: "Every key's totals for a day",
      description:
        "Every key's totals for one UTC day, for invoicing: every key that existed on the day, in id order, zeros where it made no request. A day that is not over is read live from each listed key's quota object (one call per key on the page) and answered with `asOf`, the time of reading: its totals are the day so far, and admitted may lag the requests served by seconds to minutes. A finished day's totals are final (`asOf` null). As CSV, the next page's cursor is in the Next-Cursor header and the time of reading in Usage-As-Of. 400 for a day after today (UTC): it has no usage yet. 503 if a key's quota object could not be reached.",
      security,
      request: { query: DayUsageQuerySchema },
      responses: {
        200: {
          description: "One entry per key",
          headers: {
            "Next-Cursor": {
              description: "As CSV: the next page's cursor, while more keys follow",
              schema: { type: "string" as const },
            },
            "Usage-As-Of": {
              description: "As CSV, for a day not over: the time of reading (the JSON's asOf)",
              schema: { type: "string" as const },
            },
          },
          content: jsonOrCsv(DayUsagePageSchema),
        },
        ...adminErrorResponses(400, 401, 429, 503),
      },
    }),
    async (c) => {
      const { day, limit, cursor } = c.req.valid("query");
      const now = clock.now();
      begunOrThrow("day", day, now);
      const dayStart = dayStartOf(day);
      const dayEnd = dayStart + DAY_MS;
      const rows = await listUsageOfDay(c.env.DB, {
        day,
        dayEnd,
        limit: limit + 1,
        afterKeyId: cursor
          ? await decodeCursorOrThrow(cursorSecrets(c), "usage-day", cursor, "string")
          : undefined,
      });
      const { page: stored, nextCursor } = await pageOf(rows, limit, {
        secrets: cursorSecrets(c),
        list: "usage-day",
        valuesOf: (last) => [last.keyId],
      });
      const held = dayStart <= now && now < dayEnd + HELD_AFTER_DAY_END_MS;
      const page = held ? await withHeldTotalsOrThrow(c.env, day, stored) : stored;
      // A day not over yet is the day so far: said, with the time of reading.
      const asOf = now < dayEnd ? isoTime(now) : null;
      if (wantsCsv(c.req.header("Accept"))) {
        const csv = toCsv(
          ["key_id", "name", "plan", "owner_id", ...USAGE_COLUMNS],
          page.map((r) => [r.keyId, r.name, r.plan, r.ownerId, ...usageCells(r)]),
        );
        return csvResponse(c, csv, {
          ...(nextCursor ? { "Next-Cursor": nextCursor } : {}),
          ...(asOf ? { "Usage-As-Of": asOf } : {}),
        });
      }
      return c.json({ data: page, nextCursor, asOf }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/audit",
      operationId: "listAudit",
      tags: ["Audit"],
      summary: "The audit trail",
      description:
        "One entry per admin write (create, update, disable, enable, revoke, roll, unban, webhook_…) and per automatic ban and ban end (ban, ban_end, by the actor `system`): when, who (an admin token's name, or system), which key or webhook endpoint, the fields changed before → after (never a secret or a hash) and the request id. Newest first, a page at a time; `keyId` or `endpointId`, `actor`, `action` and the UTC days `from`–`to` (inclusive; `to` may be after today) narrow it. 400 for a reversed range, or a `from` after today (UTC): no entry can be in it yet.",
      security,
      request: { query: AuditQuerySchema },
      responses: {
        200: {
          description: "Audit entries, newest first",
          content: { "application/json": { schema: AuditPageSchema } },
        },
        ...adminErrorResponses(400, 401, 429, 503),
      },
    }),
    async (c) => {
      const { keyId, endpointId, actor, action, from, to, limit, cursor } = c.req.valid("query");
      // An endpoint's entries are stored under its id where a key's are (key_id).
      if (keyId && endpointId)
        throw new ApiError("invalid_request", "endpointId: give keyId or endpointId, not both.");
      // As the usage reads: a day that has not begun has no entries yet, and an empty page would
      // read as "nothing happened". A range may end after today (it then ends now).
      begunOrThrow("from", from, clock.now());
      if (from && to && from > to)
        throw new ApiError("invalid_request", `from: must not be after to (${from} > ${to}).`);
      const entries = await listAudit(c.env.DB, {
        keyId: keyId ?? endpointId,
        actor,
        action,
        from: from === undefined ? undefined : dayStartOf(from),
        until: to === undefined ? undefined : dayStartOf(to) + DAY_MS,
        limit: limit + 1,
        beforeId: cursor
          ? await decodeCursorOrThrow(cursorSecrets(c), "audit", cursor, "number")
          : undefined,
      });
      const { page, nextCursor } = await pageOf(entries, limit, {
        secrets: cursorSecrets(c),
        list: "audit",
        valuesOf: (last) => [last.id],
      });
      return c.json(
        {
          data: page.map(auditEntryView),
          nextCursor,
        },
        200,
      );
    },
  );
