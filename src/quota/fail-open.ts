import { clock, MINUTE_MS } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";
import { fallbackHeaders, retryAfterSeconds } from "./headers";
import type { Limits } from "./plans";
import { refusalError } from "./refusals";
import type { Refusal, SeenRefusal } from "./windows";

/**
 * What a request gets when the key's object gives no decision, and this isolate's memory of it:
 * an overloaded object gets the key a 429; an unreachable one lets the request through (fail
 * open) within a bounded allowance. The guarantees are in docs/quotas.md ("When the limiter does
 * not answer").
 */

/** What an isolate remembers of a key while its limiter cannot be reached. */
export interface FallbackState {
  /** Start of the minute window `admitted` counts in. */
  minuteStart: number;
  /** Requests this isolate let through without the object in that minute. */
  admitted: number;
}

type FallbackVerdict =
  | { admit: true; state: FallbackState }
  | { admit: false; reason: "refused_before" | "allowance_used"; retryAt: number };

/**
 * Failing open, bounded. While the key's object is unreachable (a real outage, not an overloaded
 * object), an isolate lets through at most the key's per-minute limit per minute window, and
 * nothing for a key it has seen refused or banned until that refusal's retryAt: flooding the
 * object cannot buy a client more than its own plan.
 */
export function fallbackVerdict(
  previous: FallbackState,
  limits: Limits,
  refusedUntil: number,
  now: number,
): FallbackVerdict {
  if (refusedUntil > now) return { admit: false, reason: "refused_before", retryAt: refusedUntil };
  const minuteStart = now - (now % MINUTE_MS);
  const admitted = previous.minuteStart === minuteStart ? previous.admitted : 0;
  if (admitted >= limits.perMinute) {
    return { admit: false, reason: "allowance_used", retryAt: minuteStart + MINUTE_MS };
  }
  return { admit: true, state: { minuteStart, admitted: admitted + 1 } };
}

// Per key, what this isolate let through while the key's object was unreachable (a bounded
// fallback allowance, see fallbackVerdict).
const fallbacks = new ExpiringMap<string, FallbackState>(10_000);

/** Why the key's object gave no decision, and the last refusal this isolate saw for the key. */
export interface NoDecision {
  overloaded: boolean;
  refusal: SeenRefusal | null;
}

/**
 * The answer to a request of key `keyId` the object gave no decision on: let through with the
 * fallback headers (counted in this isolate's allowance), or refused with the error to answer
 * and what the access log records.
 */
export type AnswerWithoutObject =
  | { admitted: true; quota: "unavailable"; headers: Record<string, string> }
  | { admitted: false; quota: Refusal | "overloaded" | "unavailable"; error: ApiError };

/** How long a request refused because the key's object is overloaded is told to wait (429). */
export const OVERLOADED_RETRY_MS = 1_000;

/**
 * Overloaded: the key's own traffic is more than its object takes, so the key waits (429), never
 * admitted. Unreachable: a real outage, let through within the fallback allowance, never for a
 * key refused here in the current window.
 */
export function answerWithoutObject(
  keyId: string,
  limits: Limits,
  why: NoDecision,
  now: number,
): AnswerWithoutObject {
  if (why.overloaded) {
    const error = new ApiError(
      "rate_limited",
      "Too many requests for this API key right now; wait for Retry-After, then back off exponentially.",
      {
        ...fallbackHeaders(limits.perMinute, 0, now + OVERLOADED_RETRY_MS, now),
        "Retry-After": String(OVERLOADED_RETRY_MS / 1000),
      },
    );
    return { admitted: false, quota: "overloaded", error };
  }
  const verdict = fallbackVerdict(
    fallbacks.get(keyId, now) ?? { minuteStart: 0, admitted: 0 },
    limits,
    why.refusal?.retryAt ?? 0,
    now,
  );
  if (!verdict.admit) {
    const quota = why.refusal?.outcome ?? "unavailable";
    const headers = {
      ...fallbackHeaders(limits.perMinute, 0, verdict.retryAt, now),
      "Retry-After": retryAfterSeconds(verdict.retryAt, now),
    };
    if (why.refusal)
      return { admitted: false, quota, error: refusalError(why.refusal.outcome, headers) };
    log("warn", "quota limiter unreachable; fallback allowance used up", { keyId });
    const error = new ApiError(
      "service_unavailable",
      "The rate limiter is unavailable; wait for Retry-After.",
      headers,
    );
    return { admitted: false, quota, error };
  }
  fallbacks.set(keyId, verdict.state, verdict.state.minuteStart + MINUTE_MS);
  log("warn", "quota limiter unreachable; failing open", { keyId });
  const { minuteStart, admitted } = verdict.state;
  const headers = fallbackHeaders(
    limits.perMinute,
    limits.perMinute - admitted,
    minuteStart + MINUTE_MS,
    now,
  );
  return { admitted: true, quota: "unavailable", headers };
}

// While the limiter is unreachable: each key's re-read answer, reused for a few seconds to spare D1.
const rereadProblems = new ExpiringMap<string, string | null>(10_000);
const REREAD_MS = 5_000;

/**
 * Why key `keyId` may not be used, as `read` finds it now (the key's record in D1), or null;
 * cached REREAD_MS per key. Failing open skips the object, which is what makes a cached key's
 * revocation immediate, so a request let through re-reads its key.
 */
export async function rereadKeyProblem(
  keyId: string,
  read: (now: number) => Promise<string | null>,
): Promise<string | null> {
  const now = clock.now();
  const known = rereadProblems.get(keyId, now);
  if (known !== undefined) return known;
  const problem = await read(now);
  rereadProblems.set(keyId, problem, now + REREAD_MS);
  return problem;
}
