import { clock, DAY_MS, MINUTE_MS } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";
import { fallbackHeaders, retryAfterSeconds } from "./headers";
import { takePermits } from "./lease";
import type { Limits } from "./plans";
import { refusalError } from "./refusals";
import {
  EMPTY_USAGE,
  type Refusal,
  rollWindows,
  type SeenRefusal,
  type UsageState,
} from "./windows";

/**
 * What a request gets when the key's object gives no decision (answerWithoutObject), and this
 * isolate's memory of it. The guarantees are in docs/quotas.md ("When the limiter does not answer").
 */

type FallbackVerdict =
  | { admit: true; state: UsageState }
  | { admit: false; reason: "refused_before" | "allowance_used"; retryAt: number };

/**
 * Failing open, bounded. While the key's object is unreachable (a real outage, not an overloaded
 * object), an isolate lets through at most the key's per-minute limit per minute window and its
 * per-day limit per UTC day, and nothing for a key it has seen refused or banned until that
 * refusal's retryAt: flooding the object cannot buy a client more than its own plan. `previous`
 * counts what this isolate let through, in windows that only move forward, as the object's do.
 */
export function fallbackVerdict(
  previous: UsageState,
  limits: Limits,
  refusedUntil: number,
  now: number,
): FallbackVerdict {
  if (refusedUntil > now) return { admit: false, reason: "refused_before", retryAt: refusedUntil };
  const state = rollWindows(previous, now);
  if (state.dayCount >= limits.perDay) {
    return { admit: false, reason: "allowance_used", retryAt: state.dayStart + DAY_MS };
  }
  if (state.minuteCount >= limits.perMinute) {
    return { admit: false, reason: "allowance_used", retryAt: state.minuteStart + MINUTE_MS };
  }
  return { admit: true, state: takePermits(state, 1) };
}

// Per key, what this isolate let through while the key's object was unreachable (a bounded
// fallback allowance, see fallbackVerdict), kept until the day it counts in is over.
const fallbacks = new ExpiringMap<string, UsageState>(10_000);

/**
 * Why the key's object gave no decision, and the last refusal this isolate saw for the key.
 * `persistentFailure`: the object fails every call the same way (it cannot open, or its own code
 * throws; see objects/stub-call.ts), with that failure's message; null or absent (a holder of
 * the release before) for an outage.
 */
export interface NoDecision {
  overloaded: boolean;
  refusal: SeenRefusal | null;
  persistentFailure?: string | null;
}

// Per key, the minute this isolate last logged the key's object failing for good.
const persistentFailuresLogged = new ExpiringMap<string, number>(10_000);

/**
 * Logs that key `keyId`'s object fails for good (with the cause), at most once per key per
 * minute window in this isolate: the failure repeats on every request until someone acts.
 */
export function logPersistentFailure(keyId: string, cause: string, now: number): void {
  const minuteStart = now - (now % MINUTE_MS);
  if (persistentFailuresLogged.get(keyId, now) === minuteStart) return;
  persistentFailuresLogged.set(keyId, minuteStart, minuteStart + MINUTE_MS);
  const failure = "the key's quota object fails every call; refusing its requests";
  log("error", failure, { keyId, cause });
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

// The messages of the 503s answered without the object: it fails for good, or it is unreachable.
const CANNOT_COUNT = "The rate limiter cannot count this key's requests; wait for Retry-After.";
const UNAVAILABLE = "The rate limiter is unavailable; wait for Retry-After.";

/**
 * Overloaded: the key's own traffic is more than its object takes, so the key waits (429), never
 * admitted. Failing for good: nothing can count the request and waiting does not mend it, so it
 * is no outage: 503 until the minute ends (or the refusal seen here last, while it lasts), never
 * admitted, logged once a minute. Unreachable: a real outage, let through within the fallback
 * allowance, never for a key refused here in the current window.
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
      refusedHeaders(now + OVERLOADED_RETRY_MS, limits, now),
    );
    return { admitted: false, quota: "overloaded", error };
  }
  if (why.persistentFailure) {
    logPersistentFailure(keyId, why.persistentFailure, now);
    const refusal = why.refusal && why.refusal.retryAt > now ? why.refusal : null;
    const retryAt = refusal?.retryAt ?? now - (now % MINUTE_MS) + MINUTE_MS;
    return refusedUntil(retryAt, refusal, limits, now, CANNOT_COUNT);
  }
  const verdict = fallbackVerdict(
    fallbacks.get(keyId, now) ?? EMPTY_USAGE,
    limits,
    why.refusal?.retryAt ?? 0,
    now,
  );
  if (!verdict.admit) {
    if (!why.refusal)
      log("warn", "quota limiter unreachable; fallback allowance used up", { keyId });
    return refusedUntil(verdict.retryAt, why.refusal, limits, now, UNAVAILABLE);
  }
  fallbacks.set(keyId, verdict.state, verdict.state.dayStart + DAY_MS);
  log("warn", "quota limiter unreachable; failing open", { keyId });
  const { minuteStart, minuteCount } = verdict.state;
  const remaining = limits.perMinute - minuteCount;
  const headers = fallbackHeaders(limits.perMinute, remaining, minuteStart + MINUTE_MS, now);
  return { admitted: true, quota: "unavailable", headers };
}

/** The headers of a request refused without the object until `retryAt`. */
const refusedHeaders = (retryAt: number, limits: Limits, now: number) => ({
  ...fallbackHeaders(limits.perMinute, 0, retryAt, now),
  "Retry-After": retryAfterSeconds(retryAt, now),
});

/**
 * A request refused without the object until `retryAt`: with `refusal` (the last one seen for
 * the key) if there is one, else 503 `service_unavailable` saying `unavailable`.
 */
function refusedUntil(
  retryAt: number,
  refusal: SeenRefusal | null,
  limits: Limits,
  now: number,
  unavailable: string,
): Extract<AnswerWithoutObject, { admitted: false }> {
  const headers = refusedHeaders(retryAt, limits, now);
  const error = refusal
    ? refusalError(refusal.outcome, headers)
    : new ApiError("service_unavailable", unavailable, headers);
  return { admitted: false, quota: refusal?.outcome ?? "unavailable", error };
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
