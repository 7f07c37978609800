import { DAY_MS, MINUTE_MS } from "../clock";
import type { Limits } from "./plans";

/** Fixed windows aligned to UTC: the minute [hh:mm:00, +60 s) and the day [00:00:00Z, +24 h). */
export interface UsageState {
  minuteStart: number;
  minuteCount: number;
  /** Requests refused in this minute window; past the ban threshold the key is banned. */
  minuteRejected: number;
  dayStart: number;
  dayCount: number;
  bannedUntil: number;
}

/** What the key's object enforces; `version` orders updates so a stale caller never wins. */
export interface Policy extends Limits {
  version: number;
  revoked: boolean;
}

export type Outcome = "allowed" | "rate_limited" | "quota_exceeded" | "key_banned" | "revoked";

export interface WindowStatus {
  name: "minute" | "day";
  limit: number;
  remaining: number;
  /** Epoch ms at which this window resets. */
  resetAt: number;
  seconds: number;
}

export interface Decision {
  outcome: Outcome;
  windows: WindowStatus[];
  /** For refusals: epoch ms after which a retry can succeed. */
  retryAt?: number;
  now: number;
  /** The version of the policy the decision applied (a key's decisions only). */
  policyVersion?: number;
}

export const EMPTY_USAGE: UsageState = { minuteStart: 0, minuteCount: 0, minuteRejected: 0, dayStart: 0, dayCount: 0, bannedUntil: 0 };

export function rollWindows(s: UsageState, now: number): UsageState {
  const minuteStart = now - (now % MINUTE_MS);
  const dayStart = now - (now % DAY_MS);
  if (minuteStart === s.minuteStart && dayStart === s.dayStart) return s;
  const next = { ...s };
  if (minuteStart !== s.minuteStart) Object.assign(next, { minuteStart, minuteCount: 0, minuteRejected: 0 });
  if (dayStart !== s.dayStart) Object.assign(next, { dayStart, dayCount: 0 });
  return next;
}

export function windowsOf(s: UsageState, limits: Limits): WindowStatus[] {
  return [
    { name: "minute", limit: limits.perMinute, remaining: Math.max(0, limits.perMinute - s.minuteCount), resetAt: s.minuteStart + MINUTE_MS, seconds: MINUTE_MS / 1000 },
    { name: "day", limit: limits.perDay, remaining: Math.max(0, limits.perDay - s.dayCount), resetAt: s.dayStart + DAY_MS, seconds: DAY_MS / 1000 },
  ];
}

/** A key that keeps sending while throttled: more refusals in one minute than its per-minute limit (at least 10). */
export function banThreshold(perMinute: number): number {
  return Math.max(10, perMinute);
}

/**
 * Decides one request. Admitting increments both windows together; a refusal increments
 * neither (it only counts towards the ban). Pure, so the rules are testable on their own.
 */
export function decide(previous: UsageState, policy: Policy, now: number, banMs: number): { state: UsageState; decision: Decision } {
  let state = rollWindows(previous, now);
  const result = (outcome: Outcome, retryAt?: number) => ({ state, decision: { outcome, windows: windowsOf(state, policy), retryAt, now, policyVersion: policy.version } });

  if (policy.revoked) return result("revoked");
  if (state.bannedUntil > now) return result("key_banned", state.bannedUntil);

  const dayFull = state.dayCount >= policy.perDay;
  const minuteFull = state.minuteCount >= policy.perMinute;
  if (!dayFull && !minuteFull) {
    state = { ...state, minuteCount: state.minuteCount + 1, dayCount: state.dayCount + 1 };
    return result("allowed");
  }

  state = { ...state, minuteRejected: state.minuteRejected + 1 };
  if (state.minuteRejected > banThreshold(policy.perMinute)) {
    state = { ...state, bannedUntil: now + banMs };
    return result("key_banned", state.bannedUntil);
  }
  return dayFull ? result("quota_exceeded", state.dayStart + DAY_MS) : result("rate_limited", state.minuteStart + MINUTE_MS);
}

/** The per-client shield against key guessing: counts failed authentications in the minute window. */
export function countFailure(previous: UsageState, limit: number, now: number): { state: UsageState; decision: Decision } {
  let state = rollWindows(previous, now);
  const blocked = state.minuteCount >= limit;
  if (!blocked) state = { ...state, minuteCount: state.minuteCount + 1 };
  const minute = windowsOf(state, { perMinute: limit, perDay: Number.MAX_SAFE_INTEGER })[0]!;
  return { state, decision: { outcome: blocked ? "rate_limited" : "allowed", windows: [minute], retryAt: blocked ? minute.resetAt : undefined, now } };
}
