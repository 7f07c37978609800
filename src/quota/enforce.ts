import type { MiddlewareHandler } from "hono";
import { endTime, startTime } from "hono/timing";
import type { AppEnv } from "../app-env";
import { apiAuthFailure, problemWith } from "../auth/authenticate";
import { forgetKey } from "../auth/key-cache";
import { clock } from "../clock";
import { getKey, type KeyRecord } from "../db/keys";
import { ApiError } from "../errors";
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

/**
 * One RPC to the key's quota object decides and counts the request. If the object cannot be
 * reached the request is let through (fail open) with a logged warning and no X-RateLimit-*
 * headers: an outage of the limiter must not become an outage of the API. The key is then
 * re-read from D1 first, since the object is what makes a cached key's revocation immediate.
 */
export const enforceQuota: MiddlewareHandler<AppEnv> = async (c, next) => {
  const key = c.get("apiKey");
  startTime(c, "quota");
  let decision: Decision | null = null;
  try {
    decision = await c.env.QUOTA.getByName(key.id).admit(policyOf(key));
  } catch (err) {
    console.warn(JSON.stringify({ level: "warn", msg: "quota limiter unreachable; failing open", requestId: c.get("requestId"), keyId: key.id, error: String(err) }));
  }
  endTime(c, "quota");
  c.set("quota", decision?.outcome ?? "unavailable");
  if (!decision) {
    const problem = problemWith(await getKey(c.env.DB, key.id), clock.now());
    if (problem) {
      forgetKey(key.id);
      throw await apiAuthFailure(c, problem, true);
    }
    return next();
  }

  if (decision.outcome === "revoked") {
    forgetKey(key.id);
    throw await apiAuthFailure(c, "The API key has been revoked.", true);
  }
  const headers = rateLimitHeaders(decision);
  if (decision.outcome !== "allowed") throw new ApiError(decision.outcome, REFUSALS[decision.outcome], headers);
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  await next();
};
