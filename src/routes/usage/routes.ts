import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { type ApiKeyVariables, authenticate, reauthenticateOrThrow } from "../../auth/api-key";
import { policyOf } from "../../db/keys";
import { everyDay, readUsageDays } from "../../db/usage-history";
import { clock, DAY_MS, dayName, dayStartOf, isoTime, MINUTE_MS } from "../../lib/clock";
import { ApiError } from "../../lib/errors";
import { ExpiringMap } from "../../lib/expiring-map";
import type { EnvWith } from "../../lib/hono-env";
import { validationHook } from "../../middleware/validation-hook";
import { countInShield } from "../../objects/auth-shield-client";
import { locationOf } from "../../objects/quota-holder-client";
import { QuotaLimiterClient } from "../../objects/quota-limiter-client";
import { rateLimitHeaders } from "../../quota/headers";
import type { Decision, KeyUsage, WindowStatus } from "../../quota/windows";
import { errorResponses, json } from "../../schemas/common";
import { RATE_LIMIT_HEADERS } from "../../schemas/headers";
import { OWN_USAGE_DAYS, OwnUsageSchema } from "../../schemas/usage";

/**
 * Usage reads a key may make per minute. They are counted in a shield object of their own
 * (`usage-reads:<key id>`), not in the key's quota object, and a refusal is remembered in the
 * isolate until its window ends: a client polling this endpoint in a loop costs the key's object
 * at most this many calls a minute, and nothing once refused.
 */
export const USAGE_READS_PER_MINUTE = 30;

// Keys refused more usage reads in this isolate, with the window they were refused for.
const refusedReads = new ExpiringMap<string, WindowStatus>(10_000);

function tooManyReads(decision: Decision): ApiError {
  return new ApiError(
    "rate_limited",
    `Too many usage reads for this API key: at most ${USAGE_READS_PER_MINUTE} a minute; wait for Retry-After. They never count against the key's quota.`,
    rateLimitHeaders(decision),
  );
}

/** Counts this usage read against the key's own usage-read limit; throws 429 past it. */
async function countUsageReadOrThrow(env: Env, keyId: string): Promise<void> {
  const now = clock.now();
  const refused = refusedReads.get(keyId, now);
  if (refused)
    throw tooManyReads({
      outcome: "rate_limited",
      retryAt: refused.resetAt,
      now,
      windows: [refused],
    });
  const decision = await countInShield(
    env.AUTH_SHIELD,
    `usage-reads:${keyId}`,
    USAGE_READS_PER_MINUTE,
  );
  if (decision.outcome !== "allowed") {
    const window = decision.windows[0]!;
    refusedReads.set(keyId, window, window.resetAt);
    throw tooManyReads(decision);
  }
}

/** The key's two windows as its quota object has them now (nothing counted). */
function windowsOf(usage: KeyUsage): WindowStatus[] {
  const window = (name: "minute" | "day", w: KeyUsage["minute"], seconds: number) => {
    const limit = w.limit ?? 0;
    return { name, limit, remaining: Math.max(0, limit - w.count), resetAt: w.resetAt, seconds };
  };
  return [
    window("minute", usage.minute, MINUTE_MS / 1000),
    window("day", usage.day, DAY_MS / 1000),
  ];
}

/**
 * The usual rate-limit headers of the key's quota as it stands, as a /v1 request would get them,
 * without counting this one: while banned, Remaining 0 and Reset at the ban's end (no
 * Retry-After: this answer is not a refusal).
 */
function quotaHeaders(windows: WindowStatus[], bannedUntil: number | null, now: number) {
  const decision: Decision =
    bannedUntil === null
      ? { outcome: "allowed", windows, now }
      : {
          outcome: "key_banned",
          windows,
          now,
          retryAt: Math.max(
            bannedUntil,
            ...windows.filter((w) => w.remaining === 0).map((w) => w.resetAt),
          ),
        };
  const { "Retry-After": _, ...headers } = rateLimitHeaders(decision);
  return headers;
}

const usageRoute = createRoute({
  method: "get",
  path: "/usage",
  operationId: "getUsage",
  tags: ["Usage"],
  summary: "Your key's quota and usage (free)",
  description: `The key this request authenticates with: its plan and limits, both quota windows (used, remaining, reset) as they stand, any temporary ban, its prefix and expiry, and its requests per UTC day for the last ${OWN_USAGE_DAYS} days (admitted, and refused by reason). It does not count against the key's quota and works while the key is banned or over its limits. It has its own limit instead: ${USAGE_READS_PER_MINUTE} reads per key and minute, then 429 \`rate_limited\` with Retry-After (the X-RateLimit-* and RateLimit headers of that 429 describe the usage-read window). A 200 carries the key's usual quota headers, as the next request would see them before it is counted.`,
  security: [{ bearerAuth: [] }],
  responses: {
    200: {
      description: "The key's quota and usage; not counted",
      headers: RATE_LIMIT_HEADERS,
      content: json(OwnUsageSchema),
    },
    ...errorResponses(400, 401, 429, 500, 503),
  },
});

/** GET /v1/usage: authenticated like every /v1 route, but outside the key's quota (see app.ts). */
export const ownUsageApi = new OpenAPIHono<EnvWith<ApiKeyVariables>>({
  defaultHook: validationHook,
}).openapi({ ...usageRoute, middleware: authenticate }, async (c) => {
  let key = c.var.apiKey;
  await countUsageReadOrThrow(c.env, key.id);
  const location = locationOf(c.req.raw, c.env.QUOTA_HOLDER);
  const { usage, days: held } = await new QuotaLimiterClient(
    c.env.QUOTA,
    key,
    location,
  ).reportOrThrow(policyOf(key));
  // This isolate's record of the key may be up to the key cache's age; the object is told of
  // every change at once (a revocation, a disabling, a roll, a new expiry: a newer version).
  if (usage.policy && (usage.policy.revoked || usage.policy.version > key.version))
    key = await reauthenticateOrThrow(c);
  const now = clock.now();
  const [minute, day] = windowsOf(usage) as [WindowStatus, WindowStatus];
  // Set now, as enforceQuota sets an admitted request's: an error from here on (D1 failing for
  // the days) carries the key's windows, not the client's failed-authentication window.
  for (const [name, value] of Object.entries(quotaHeaders([minute, day], usage.bannedUntil, now)))
    c.header(name, value);
  const to = dayName(now);
  const from = dayName(dayStartOf(to) - (OWN_USAGE_DAYS - 1) * DAY_MS);
  // The object's days go last so they win: it holds today, and any day D1 has not taken yet.
  const days = everyDay(from, to, [...(await readUsageDays(c.env.DB, key.id, from, to)), ...held]);
  const windowView = (w: WindowStatus, used: number) => ({
    limit: w.limit,
    used,
    remaining: w.remaining,
    resetAt: isoTime(w.resetAt),
  });
  return c.json(
    {
      key: {
        id: key.id,
        name: key.name,
        prefix: key.prefix,
        expiresAt: isoTime(key.expiresAt),
      },
      plan: key.plan,
      limits: { perMinute: minute.limit, perDay: day.limit },
      windows: {
        minute: windowView(minute, usage.minute.count),
        day: windowView(day, usage.day.count),
      },
      ban: usage.bannedUntil === null ? null : { until: isoTime(usage.bannedUntil) },
      days,
    },
    200,
  );
});
