import type { Context, MiddlewareHandler } from "hono";
import { wrapTime } from "hono/timing";
import type { AppEnv } from "../app-env";
import { apiAuthFailure, KEY_PROBLEMS, problemWith } from "../auth/authenticate";
import { forgetKey } from "../auth/key-cache";
import { clock } from "../clock";
import { getKey, type KeyRecord } from "../db/keys";
import { ApiError } from "../errors";
import { ExpiringMap } from "../expiring-map";
import { BOOKMARK_HEADER } from "../middleware/d1-session";
import { rateLimitHeaders } from "./headers";
import type { Decision, Policy } from "./windows";

export function policyOf(key: KeyRecord): Policy {
  return { ...key.limits, version: key.version, revoked: key.revokedAt !== null };
}

const REFUSALS = {
  rate_limited: "Per-minute rate limit exceeded; wait for Retry-After, then back off exponentially.",
  quota_exceeded: "Daily quota exceeded; it resets at 00:00 UTC (see Retry-After). Upgrade the plan for more.",
  key_banned: "The API key is temporarily banned for repeated requests after 429 responses; wait for Retry-After.",
} as const;

// Headers a read's handler adds to its answer (see routes/pets.ts and middleware/d1-session.ts).
const READ_ANSWER_HEADERS = ["ETag", "Link", BOOKMARK_HEADER];

// Routes that only read (listPets, getPet): the only ones whose handler may run before the decision.
const SIDE_EFFECT_FREE_ROUTES = /^\/v1\/pets(\/[^/]+)?$/;

// Keys whose last decision in this isolate left room: their reads run alongside the limiter call.
const roomy = new ExpiringMap<string, true>(10_000);

function remember(keyId: string, decision: Decision | null): void {
  const room = decision?.outcome === "allowed" && decision.windows.every((w) => w.remaining > 0);
  if (room) roomy.set(keyId, true, Infinity);
  else roomy.delete(keyId);
}

/** One RPC to the key's quota object, which decides and counts; null if it cannot be reached. */
function admit(c: Context<AppEnv>, key: KeyRecord): Promise<Decision | null> {
  const ask = async () => {
    try {
      return await c.env.QUOTA.getByName(key.id).admit(policyOf(key));
    } catch (err) {
      console.warn(JSON.stringify({ level: "warn", msg: "quota limiter unreachable; failing open", requestId: c.get("requestId"), keyId: key.id, error: String(err) }));
      return null;
    }
  };
  return wrapTime(c, "quota", ask());
}

// While the limiter is unreachable: each key's re-read answer, reused for a few seconds to spare D1.
const rechecked = new ExpiringMap<string, string | null>(10_000);
const RECHECK_MS = 5_000;

async function recheck(c: Context<AppEnv>, keyId: string): Promise<string | null> {
  const now = clock.now();
  const known = rechecked.get(keyId, now);
  if (known !== undefined) return known;
  const problem = problemWith(await getKey(c.env.DB, keyId), now);
  rechecked.set(keyId, problem, now + RECHECK_MS);
  return problem;
}

/** Throws the answer for a refused request; returns the rate-limit headers of an admitted one. */
async function enforce(c: Context<AppEnv>, key: KeyRecord, decision: Decision | null): Promise<Record<string, string>> {
  c.set("quota", decision?.outcome ?? "unavailable");
  remember(key.id, decision);
  if (!decision) {
    // Failing open skips the object, which is what makes a cached key's revocation immediate,
    // so re-read the key (at most every few seconds per key, to spare D1 during the outage).
    const problem = await recheck(c, key.id);
    if (problem) {
      forgetKey(key.id);
      throw await apiAuthFailure(c, problem, true);
    }
    return {};
  }
  // The object applied a newer policy than this isolate's cached record (a plan change or a
  // revocation made elsewhere): drop the record so the next request reads the key afresh.
  if (decision.outcome === "revoked" || (decision.policyVersion ?? 0) > key.version) forgetKey(key.id);
  if (decision.outcome === "revoked") throw await apiAuthFailure(c, KEY_PROBLEMS.revoked, true);
  const headers = rateLimitHeaders(decision);
  if (decision.outcome !== "allowed") throw new ApiError(decision.outcome, REFUSALS[decision.outcome], headers);
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
export const enforceQuota: MiddlewareHandler<AppEnv> = async (c, next) => {
  const key = c.get("apiKey");
  const decision = admit(c, key);
  const isRead = (c.req.method === "GET" || c.req.method === "HEAD") && SIDE_EFFECT_FREE_ROUTES.test(c.req.path);
  if (!(isRead && roomy.get(key.id, 0))) {
    const headers = await enforce(c, key, await decision);
    for (const [name, value] of Object.entries(headers)) c.header(name, value);
    return next();
  }
  await next();
  let headers: Record<string, string>;
  try {
    headers = await enforce(c, key, await decision);
  } catch (refusal) {
    // The refusal replaces the read's answer: drop what describes that answer, keep the rest.
    for (const name of READ_ANSWER_HEADERS) c.res.headers.delete(name);
    throw refusal;
  }
  for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
};
