import { clock, DAY_MS, MINUTE_MS, minuteEndOf } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";
import { fallbackHeaders, refusalError, retryAfterSeconds } from "./headers";
import { takePermits } from "./lease";
import type { Limits } from "./plans";
import {
  EMPTY_USAGE,
  type Refusal,
  rollWindows,
  type SeenRefusal,
  type UsageState,
} from "./windows";

// No decision from the key's object: docs/quotas.md, "When the limiter does not answer".

type FallbackVerdict =
  | { admit: true; state: UsageState }
  | { admit: false; reason: "refused_before" | "allowance_used"; retryAt: number };

/**
 * Failing open, bounded: at most the key's own limits per window (`previous`: what this isolate let
 * through), nothing for a key seen refused until its retryAt: flooding buys no more than the plan.
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

const fallbacks = new ExpiringMap<string, UsageState>(10_000);

/** Why no decision (a persistent failure, stub-call.ts; else an outage), and the last refusal. */
export interface NoDecision {
  overloaded: boolean;
  refusal: SeenRefusal | null;
  persistentFailure?: string | null;
}

const persistentFailuresLogged = new ExpiringMap<string, number>(10_000);

/** Logs that key `keyId`'s object fails for good, at most once per key per minute here. */
export function logPersistentFailure(keyId: string, cause: string, now: number): void {
  const minuteStart = now - (now % MINUTE_MS);
  if (persistentFailuresLogged.get(keyId, now) === minuteStart) return;
  persistentFailuresLogged.set(keyId, minuteStart, minuteStart + MINUTE_MS);
  const failure = "the key's quota object fails every call; refusing its requests";
  log("error", failure, { keyId, cause });
}

type AnswerWithoutObject =
  | { admitted: true; quota: "unavailable"; headers: Record<string, string> }
  | { admitted: false; quota: Refusal | "overloaded" | "unavailable"; error: ApiError };

export const OVERLOADED_RETRY_MS = 1_000;

const CANNOT_COUNT = "The rate limiter cannot count this key's requests; wait for Retry-After.";
const UNAVAILABLE = "The rate limiter is unavailable; wait for Retry-After.";

/**
 * Overloaded (the key's own traffic): 429. Failing for good: 503 until the minute ends (or the
 * last refusal seen). Unreachable: let through within the fallback allowance (`fallbackVerdict`).
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
    const retryAt = refusal?.retryAt ?? minuteEndOf(now);
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

const refusedHeaders = (retryAt: number, limits: Limits, now: number) => ({
  ...fallbackHeaders(limits.perMinute, 0, retryAt, now),
  "Retry-After": retryAfterSeconds(retryAt, now),
});

/** Refused without the object until `retryAt`: as `refusal`, else 503 saying `unavailable`. */
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

const rereadProblems = new ExpiringMap<string, string | null>(10_000);
const REREAD_MS = 5_000;

/**
 * Why key `keyId` may not be used as D1 has it now (cached REREAD_MS): failing open skips the
 * object, which is what makes a cached key's revocation immediate.
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
