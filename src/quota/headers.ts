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
 * window, and Retry-After (whole seconds, at least 1) on refusals.
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
      .map(
        (w) =>
          `"${w.name}";r=${banned ? 0 : w.remaining};t=${Math.max(0, toSeconds((banned ? resetAt : w.resetAt) - d.now))}`,
      )
      .join(", "),
  };
  if ("retryAt" in d) headers["Retry-After"] = retryAfterSeconds(d.retryAt, d.now);
  return headers;
}
