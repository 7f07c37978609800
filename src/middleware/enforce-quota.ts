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
import { clock } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import type { EnvWith } from "../lib/hono-env";
import { log } from "../lib/log";
import { type AdmitResult, policyOf, QuotaLimiterClient } from "../objects/quota-limiter-client";
import { rateLimitHeaders } from "../quota/headers";
import type { Outcome } from "../quota/windows";
import { BOOKMARK_HEADER } from "./d1-session";

/** Set by `enforceQuota`, for the access log: what the limiter decided, or "unavailable". */
export interface QuotaVariables {
  quota: Outcome | "unavailable";
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

// Routes that only read (listPets, getPet): the only ones whose handler may run before the decision.
const SIDE_EFFECT_FREE_ROUTES = /^\/v1\/pets(\/[^/]+)?$/;

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

/** Throws the answer for a refused request; returns the rate-limit headers of an admitted one. */
async function headersOrThrowRefusal(
  c: Context<QuotaEnv>,
  key: KeyRecord,
  result: AdmitResult,
): Promise<Record<string, string>> {
  c.set("quota", result.reached ? result.decision.outcome : "unavailable");
  noteRoomLeft(key.id, result);
  if (!result.reached) {
    // Failing open skips the object, which is what makes a cached key's revocation immediate,
    // so re-read the key (at most every few seconds per key, to spare D1 during the outage).
    log("warn", "quota limiter unreachable; failing open", { keyId: key.id });
    const problem = await rereadKeyProblem(c.env, key.id);
    if (problem) {
      forgetKey(key.id);
      throw unusableKeyError(problem);
    }
    return {};
  }
  const { decision } = result;
  // The object applied a newer policy than this isolate's cached record (a plan change or a
  // revocation made elsewhere): drop the record so the next request reads the key afresh.
  if (decision.outcome === "revoked" || decision.policyVersion > key.version) forgetKey(key.id);
  if (decision.outcome === "revoked") {
    throw unusableKeyError(KEY_PROBLEMS.revoked);
  }
  const headers = rateLimitHeaders(decision);
  if (decision.outcome !== "allowed") {
    throw new ApiError(decision.outcome, REFUSALS[decision.outcome], headers);
  }
  return headers;
}

/**
 * Every /v1 request is decided and counted by the key's quota object before it is answered. If
 * the object cannot be reached the request is let through (fail open) with a logged warning and
 * no X-RateLimit-* headers: an outage of the limiter must not become an outage of the API.
 *
 * Reads by a key with room left run alongside the limiter call rather than after it (they have no
 * side effects, and the answer still waits for the decision): the two hops overlap instead of
 * adding up. A refused read's work is discarded; a key near or past its limit is decided first.
 */
export const enforceQuota = createMiddleware<QuotaEnv>(async (c, next) => {
  const key = c.var.apiKey;
  const limiter = new QuotaLimiterClient(c.env.QUOTA, key.id);
  const admitted = wrapTime(c, "quota", limiter.admit(policyOf(key)));
  const isRead =
    (c.req.method === "GET" || c.req.method === "HEAD") && SIDE_EFFECT_FREE_ROUTES.test(c.req.path);
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
