import { MINUTE_MS } from "../lib/clock";
import type { Decision, WindowStatus } from "./windows";

const toSeconds = (ms: number) => Math.ceil(ms / 1000);

/** `Retry-After` for a refusal that lasts until `retryAt`: whole seconds, at least 1. */
export const retryAfterSeconds = (retryAt: number, now: number): string =>
  String(Math.max(1, toSeconds(retryAt - now)));

/** The window closest to exhaustion; on a tie the longer one, since it binds for longer. */
export function bindingWindow(windows: WindowStatus[]): WindowStatus {
  return windows.reduce((a, b) => (b.remaining <= a.remaining ? b : a));
}

/**
 * X-RateLimit-* for the binding window, the IETF RateLimit/RateLimit-Policy forms for every
 * window, and Retry-After (whole seconds, at least 1) on refusals. During a ban X-RateLimit-*
 * say 0 left until the moment a request can succeed (the ban is also in Retry-After and the error
 * code), while the IETF header keeps showing each window as it really is, so a banned client
 * does not lose sight of its daily quota.
 */
export function rateLimitHeaders(d: Decision): Record<string, string> {
  const binding = bindingWindow(d.windows);
  const banned = d.outcome === "key_banned";
  const resetAt = banned ? d.retryAt : binding.resetAt;
  const headers: Record<string, string> = {
    "X-RateLimit-Limit": String(binding.limit),
    "X-RateLimit-Remaining": String(banned ? 0 : binding.remaining),
    "X-RateLimit-Reset": String(toSeconds(resetAt)),
    "RateLimit-Policy": d.windows.map((w) => `"${w.name}";q=${w.limit};w=${w.seconds}`).join(", "),
    RateLimit: d.windows
      .map((w) => `"${w.name}";r=${w.remaining};t=${Math.max(0, toSeconds(w.resetAt - d.now))}`)
      .join(", "),
  };
  if ("retryAt" in d) headers["Retry-After"] = retryAfterSeconds(d.retryAt, d.now);
  return headers;
}

/**
 * The name the IETF headers give the limit in force while the key's quota object cannot be
 * reached: the key's windows are unknown then, and these headers say so.
 */
const FALLBACK_POLICY = "fallback";

/**
 * The rate-limit headers of an answer given without the key's quota object (it did not answer):
 * they describe the fallback allowance this isolate applies meanwhile (`limit` per minute
 * window, `remaining` of it left until `resetAt`), named "fallback" in RateLimit-Policy and
 * RateLimit, never the key's own windows, which cannot be known.
 */
export function fallbackHeaders(
  limit: number,
  remaining: number,
  resetAt: number,
  now: number,
): Record<string, string> {
  const seconds = Math.max(1, toSeconds(resetAt - now));
  return {
    "X-RateLimit-Limit": String(limit),
    "X-RateLimit-Remaining": String(remaining),
    "X-RateLimit-Reset": String(toSeconds(resetAt)),
    "RateLimit-Policy": `"${FALLBACK_POLICY}";q=${limit};w=${MINUTE_MS / 1000}`,
    RateLimit: `"${FALLBACK_POLICY}";r=${remaining};t=${seconds}`,
  };
}
