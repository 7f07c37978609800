import { clock, MINUTE_MS, minuteEndOf } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import { countInShield } from "../objects/auth-shield-client";
import { rateLimitHeaders } from "../quota/headers";
import { AUTH_FAILURES_PER_MINUTE, type Decision, type WindowStatus } from "../quota/windows";

// Clients refused in this isolate, with the full window their shield object refused them for.
// They are answered here, without a call to the object or a D1 lookup, so a guessing client
// costs almost nothing.
const refused = new ExpiringMap<string, WindowStatus>(10_000);

// Each client's failure window as this isolate last learnt it from the client's shield (the
// answer to its last guess counted here), until the window ends. Answers that are not guesses
// read it here rather than call the shield: they add no round trip.
const lastSeen = new ExpiringMap<string, WindowStatus>(10_000);

/**
 * The client's failed-authentication window, read and not counted: as this isolate last learnt
 * it from the shield, or, when it has learnt nothing in the current minute, the full window (30
 * left until the minute ends). Other isolates' counts since then are not in it.
 */
function knownFailureWindow(shieldName: string, now = clock.now()): WindowStatus {
  const seen = lastSeen.get(shieldName, now);
  if (seen) return seen;
  const resetAt = minuteEndOf(now);
  const limit = AUTH_FAILURES_PER_MINUTE;
  return { name: "minute", limit, remaining: limit, resetAt, seconds: MINUTE_MS / 1000 };
}

/** The rate-limit headers of the client's failed-authentication window, read and not counted. */
export function failureWindowHeaders(
  shieldName: string,
  now = clock.now(),
): Record<string, string> {
  return rateLimitHeaders({
    outcome: "allowed",
    windows: [knownFailureWindow(shieldName, now)],
    now,
  });
}

/** Whether this isolate has seen the AuthShield `shieldName` refuse its client in this window. */
export function isRefused(shieldName: string, now = clock.now()): boolean {
  return refused.get(shieldName, now) !== undefined;
}

function tooManyFailures(decision: Decision): ApiError {
  const message = "Too many failed authentication attempts from this client; wait for Retry-After.";
  return new ApiError("rate_limited", message, rateLimitHeaders(decision));
}

/**
 * The error for a failed guess (a secret that matches nothing): counted in the client's shield,
 * 401, or 429 once this client has guessed too often in this minute. Either carries the
 * X-RateLimit-* headers of the client's failure window. Only guesses count: a missing or
 * malformed header, or a known key that may no longer be used, is not an attempt at a secret.
 */
export async function failedGuess(
  env: Env,
  shieldName: string,
  message: string,
  challenge: string,
): Promise<ApiError> {
  const now = clock.now();
  const window = refused.get(shieldName, now);
  if (window) {
    return tooManyFailures({
      outcome: "rate_limited",
      retryAt: window.resetAt,
      now,
      windows: [window],
    });
  }
  const decision = await countInShield(env.AUTH_SHIELD, shieldName, AUTH_FAILURES_PER_MINUTE);
  const seen = decision.windows[0]!;
  lastSeen.set(shieldName, seen, seen.resetAt);
  if (decision.outcome !== "allowed") {
    refused.set(shieldName, seen, seen.resetAt);
    return tooManyFailures(decision);
  }
  return new ApiError("unauthorized", message, {
    ...rateLimitHeaders(decision),
    "WWW-Authenticate": challenge,
  });
}
