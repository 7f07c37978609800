import { MINUTE_MS } from "../lib/clock";
import { ApiError } from "../lib/errors";
import type { Decision, Refusal, WindowStatus } from "./windows";

const toSeconds = (ms: number) => Math.ceil(ms / 1000);

/** `Retry-After` for a refusal that lasts until `retryAt`: whole seconds, at least 1. */
export const retryAfterSeconds = (retryAt: number, now: number): string =>
  String(Math.max(1, toSeconds(retryAt - now)));

/** The window closest to exhaustion; on a tie the longer one, since it binds for longer. */
export function bindingWindow<W extends Pick<WindowStatus, "remaining">>(windows: readonly W[]): W {
  return windows.reduce((a, b) => (b.remaining <= a.remaining ? b : a));
}

/**
 * X-RateLimit-* for the binding window (0 left during a ban), RateLimit/RateLimit-Policy for
 * every window, and Retry-After on refusals (docs/quotas.md).
 */
export function rateLimitHeaders(d: Decision): Record<string, string> {
  const headers = windowHeaders(d.windows, d.now, d.outcome === "key_banned" ? d.retryAt : null);
  if ("retryAt" in d) headers["Retry-After"] = retryAfterSeconds(d.retryAt, d.now);
  return headers;
}

function windowHeaders(
  windows: readonly (Omit<WindowStatus, "name"> & { name: string })[],
  now: number,
  bannedUntil: number | null,
): Record<string, string> {
  const binding = bindingWindow(windows);
  return {
    "X-RateLimit-Limit": String(binding.limit),
    "X-RateLimit-Remaining": String(bannedUntil === null ? binding.remaining : 0),
    "X-RateLimit-Reset": String(toSeconds(bannedUntil ?? binding.resetAt)),
    "RateLimit-Policy": windows.map((w) => `"${w.name}";q=${w.limit};w=${w.seconds}`).join(", "),
    RateLimit: windows
      .map((w) => `"${w.name}";r=${w.remaining};t=${Math.max(0, toSeconds(w.resetAt - now))}`)
      .join(", "),
  };
}

/** The headers of an answer given without the key's object: the "fallback" allowance's. */
export function fallbackHeaders(
  limit: number,
  remaining: number,
  resetAt: number,
  now: number,
): Record<string, string> {
  const fallback = { name: "fallback", limit, remaining, resetAt, seconds: MINUTE_MS / 1000 };
  return windowHeaders([fallback], now, null);
}

const REFUSALS = {
  rate_limited:
    "Per-minute rate limit exceeded; wait for Retry-After, then back off exponentially.",
  quota_exceeded:
    "Daily quota exceeded; it resets at 00:00 UTC (see Retry-After). Upgrade the plan for more.",
  key_banned:
    "The API key is temporarily banned for repeated requests after 429 responses; wait for Retry-After.",
} as const;

/** The error a refused request is answered with: the refusal's code, what to do, `headers`. */
export function refusalError(outcome: Refusal, headers: Record<string, string>): ApiError {
  return new ApiError(outcome, REFUSALS[outcome], headers);
}
