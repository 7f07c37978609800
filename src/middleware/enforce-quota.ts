import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { wrapTime } from "hono/timing";
import {
  type ApiKeyVariables,
  KEY_PROBLEMS,
  unusableKeyError,
  whyKeyUnusable,
} from "../auth/api-key";
import { forgetKey } from "../auth/key-cache";
import { getKey, type KeyRecord } from "../db/keys";
import { runAfterResponse } from "../lib/after-response";
import { clock, MINUTE_MS } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import type { EnvWith } from "../lib/hono-env";
import { log } from "../lib/log";
import type { RouteTable } from "../lib/route-table";
import {
  type AdmitResult,
  locationOf,
  policyOf,
  QuotaLimiterClient,
} from "../objects/quota-limiter-client";
import { fallbackHeaders, rateLimitHeaders, retryAfterSeconds } from "../quota/headers";
import { type FallbackState, fallbackVerdict } from "../quota/lease";
import type { Outcome } from "../quota/windows";
import { BOOKMARK_HEADER } from "./d1-session";

/**
 * Set by `enforceQuota`, for the access log: what the limiter decided, "overloaded" (the key's
 * object refused to take more calls), or "unavailable" (let through on the outage allowance).
 */
export interface QuotaVariables {
  quota: Outcome | "overloaded" | "unavailable";
}

type QuotaEnv = EnvWith<ApiKeyVariables & QuotaVariables>;

const REFUSALS = {
  rate_limited:
    "Per-minute rate limit exceeded; wait for Retry-After, then back off exponentially.",
  quota_exceeded:
    "Daily quota exceeded; it resets at 00:00 UTC (see Retry-After). Upgrade the plan for more.",
  key_banned:
    "The API key is temporarily banned for repeated requests after 429 responses; wait for Retry-After.",
} as const;

// Headers a read's handler adds to its answer (see routes/pets and middleware/d1-session.ts).
const READ_ANSWER_HEADERS = ["ETag", "Link", BOOKMARK_HEADER];

// Keys whose last decision in this isolate left room: their reads run alongside the limiter call.
const keysWithRoom = new ExpiringMap<string, true>(10_000);

function noteRoomLeft(keyId: string, result: AdmitResult): void {
  const room =
    result.reached &&
    result.decision.outcome === "allowed" &&
    result.decision.windows.every((w) => w.remaining > 0);
  if (room) keysWithRoom.set(keyId, true, Infinity);
  else keysWithRoom.delete(keyId);
}

// While the limiter is unreachable: each key's re-read answer, reused for a few seconds to spare D1.
const rereadProblems = new ExpiringMap<string, string | null>(10_000);
const REREAD_MS = 5_000;

/** Why the key may not be used, as D1 has it now (cached a few seconds per key), or null. */
async function rereadKeyProblem(env: Env, keyId: string): Promise<string | null> {
  const now = clock.now();
  const known = rereadProblems.get(keyId, now);
  if (known !== undefined) return known;
  const problem = whyKeyUnusable(await getKey(env.DB, keyId), now);
  rereadProblems.set(keyId, problem, now + REREAD_MS);
  return problem;
}

// Per key, what this isolate let through while the key's object was unreachable (a bounded
// fallback allowance, see fallbackVerdict).
const fallbacks = new ExpiringMap<string, FallbackState>(10_000);

/**
 * No decision from the object. Overloaded: the key's own traffic is more than its object takes,
 * so the key waits (429), never admitted. Unreachable: a real outage, let through within the
 * fallback allowance, never for a key refused here in the current window.
 */
async function headersOrThrowWithoutObject(
  c: Context<QuotaEnv>,
  key: KeyRecord,
  result: Extract<AdmitResult, { reached: false }>,
): Promise<Record<string, string>> {
  const now = clock.now();
  if (result.overloaded) {
    c.set("quota", "overloaded");
    throw new ApiError(
      "rate_limited",
      "Too many requests for this API key right now; wait for Retry-After, then back off exponentially.",
      { ...fallbackHeaders(key.limits.perMinute, 0, now + 1000, now), "Retry-After": "1" },
    );
  }
  const verdict = fallbackVerdict(
    fallbacks.get(key.id, now) ?? { minuteStart: 0, admitted: 0 },
    key.limits,
    result.refusal?.retryAt ?? 0,
    now,
  );
  if (!verdict.admit) {
    c.set("quota", result.refusal?.outcome ?? "unavailable");
    const headers = {
      ...fallbackHeaders(key.limits.perMinute, 0, verdict.retryAt, now),
      "Retry-After": retryAfterSeconds(verdict.retryAt, now),
    };
    if (result.refusal) {
      throw new ApiError(result.refusal.outcome, REFUSALS[result.refusal.outcome], headers);
    }
    log("warn", "quota limiter unreachable; fallback allowance used up", { keyId: key.id });
    throw new ApiError(
      "service_unavailable",
      "The rate limiter is unavailable; wait for Retry-After.",
      headers,
    );
  }
  c.set("quota", "unavailable");
  fallbacks.set(key.id, verdict.state, verdict.state.minuteStart + MINUTE_MS);
  // Failing open skips the object, which is what makes a cached key's revocation immediate,
  // so re-read the key (at most every few seconds per key, to spare D1 during the outage).
  log("warn", "quota limiter unreachable; failing open", { keyId: key.id });
  const problem = await rereadKeyProblem(c.env, key.id);
  if (problem) {
    forgetKey(key.id);
    throw unusableKeyError(problem);
  }
  const { minuteStart, admitted } = verdict.state;
  return fallbackHeaders(
    key.limits.perMinute,
    key.limits.perMinute - admitted,
    minuteStart + MINUTE_MS,
    now,
  );
}

/** Throws the answer for a refused request; returns the rate-limit headers of an admitted one. */
async function headersOrThrowRefusal(
  c: Context<QuotaEnv>,
  key: KeyRecord,
  result: AdmitResult,
): Promise<Record<string, string>> {
  noteRoomLeft(key.id, result);
  if (!result.reached) return headersOrThrowWithoutObject(c, key, result);
  c.set("quota", result.decision.outcome);
  const { decision } = result;
  // The object applied a newer policy than this isolate's cached record (a plan change or a
  // revocation made elsewhere): drop the record so the next request reads the key afresh.
  if (decision.outcome === "revoked" || decision.policyVersion > key.version) forgetKey(key.id);
  if (decision.outcome === "revoked") {
    // The object refuses revoked and disabled keys alike; D1 says which (a rare read: only the
    // first request after the change in an isolate that still held the key).
    const problem = await rereadKeyProblem(c.env, key.id).catch(() => null);
    throw unusableKeyError(problem ?? KEY_PROBLEMS.revoked);
  }
  const headers = rateLimitHeaders(decision);
  if (decision.outcome !== "allowed") {
    throw new ApiError(decision.outcome, REFUSALS[decision.outcome], headers);
  }
  return headers;
}

/**
 * Every /v1 request is decided before it is answered: by the key's quota object, which counts
 * it, or from a lease of permits the object counted for this isolate (a busy key; see
 * objects/quota-leases.ts). An overloaded object gets the key a 429; an unreachable one lets
 * the request through (fail open) within a bounded allowance, with a logged warning and
 * rate-limit headers that describe that allowance under the policy name "fallback" (the key's
 * own windows cannot be known): an outage of the limiter must not become an outage of the API,
 * and flooding the limiter must not switch it off.
 *
 * Reads by a key with room left run alongside the limiter call rather than after it (the route
 * table marks them: a read changes nothing stored, and the answer still waits for the decision):
 * the two hops overlap instead of adding up. A refused read's work is discarded; a key near or
 * past its limit is decided first.
 */
export const enforceQuota = ({ routes }: { routes: RouteTable }) =>
  createMiddleware<QuotaEnv>(async (c, next) => {
    const key = c.var.apiKey;
    const location = locationOf(c.req.raw, c.env.QUOTA_HOLDER);
    const limiter = new QuotaLimiterClient(c.env.QUOTA, key.id, location);
    const policy = policyOf(key);
    // Decided already when the key's location holder authenticated the request (auth/api-key.ts).
    const decided = c.var.admission;
    const admitted = decided
      ? Promise.resolve(decided)
      : wrapTime(
          c,
          "quota",
          limiter.admit(policy).then((result) => {
            // A lease renewal this request started, and the hand-back of a lease's unused permits
            // ≤ GIVE_BACK_GRACE_MS after it expires (if no request has), run after the response.
            if (result.reached && result.afterResponse) runAfterResponse(c, result.afterResponse);
            return result;
          }),
        );
    const isRead = routes.effectOf(c.req.method, c.req.path) === "read";
    if (!(isRead && keysWithRoom.get(key.id, 0))) {
      const headers = await headersOrThrowRefusal(c, key, await admitted);
      for (const [name, value] of Object.entries(headers)) c.header(name, value);
      return next();
    }
    await next();
    let headers: Record<string, string>;
    try {
      headers = await headersOrThrowRefusal(c, key, await admitted);
    } catch (refusal) {
      // The refusal replaces the read's answer: drop what describes that answer, keep the rest.
      for (const name of READ_ANSWER_HEADERS) c.res.headers.delete(name);
      throw refusal;
    }
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  });
