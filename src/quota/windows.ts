import { DAY_MS, MINUTE_MS } from "../lib/clock";
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
export type Policy = Limits & { version: number; revoked: boolean };

export type Refusal = "rate_limited" | "quota_exceeded" | "key_banned";

/** A refusal seen for a key, and until when it lasts. */
export type SeenRefusal = { outcome: Refusal; retryAt: number };
export type Outcome = "allowed" | Refusal | "revoked" | "stale";

export interface WindowStatus {
  name: "minute" | "day";
  limit: number;
  remaining: number;
  /** Epoch ms at which this window resets. */
  resetAt: number;
  seconds: number;
}

type DecisionOf<O extends Outcome> = { outcome: O; windows: WindowStatus[]; now: number };

/** Admitted, refused until `retryAt`, revoked, or stale (the caller's copy is old; not counted). */
export type Decision =
  | DecisionOf<"allowed">
  | (DecisionOf<Refusal> & { retryAt: number })
  | DecisionOf<"revoked">
  | DecisionOf<"stale">;

export type KeyDecision = Decision & { policyVersion: number };

export const EMPTY_USAGE: UsageState = {
  minuteStart: 0,
  minuteCount: 0,
  minuteRejected: 0,
  dayStart: 0,
  dayCount: 0,
  bannedUntil: 0,
};

/** The windows at `now`, only ever forward: a clock stepping back must not reopen a window. */
export function rollWindows(s: UsageState, now: number): UsageState {
  const minuteStart = Math.max(s.minuteStart, now - (now % MINUTE_MS));
  const dayStart = Math.max(s.dayStart, now - (now % DAY_MS));
  if (minuteStart === s.minuteStart && dayStart === s.dayStart) return s;
  const next = { ...s };
  if (minuteStart !== s.minuteStart)
    Object.assign(next, { minuteStart, minuteCount: 0, minuteRejected: 0 });
  if (dayStart !== s.dayStart) Object.assign(next, { dayStart, dayCount: 0 });
  return next;
}

const windowOf = (name: WindowStatus["name"], limit: number, count: number, start: number) => {
  const ms = name === "minute" ? MINUTE_MS : DAY_MS;
  const remaining = Math.max(0, limit - count);
  return { name, limit, remaining, resetAt: start + ms, seconds: ms / 1000 };
};

export function windowsOf(s: UsageState, limits: Limits): WindowStatus[] {
  return [
    windowOf("minute", limits.perMinute, s.minuteCount, s.minuteStart),
    windowOf("day", limits.perDay, s.dayCount, s.dayStart),
  ];
}

export interface KeyUsage {
  policy: Policy | null;
  minute: { count: number; limit: number | null; resetAt: number };
  day: { count: number; limit: number | null; resetAt: number };
  bannedUntil: number | null;
}

/** What the key's object reports at `now` for its `state` under `policy` (null: none known yet). */
export function keyUsageOf(state: UsageState, policy: Policy | null, now: number): KeyUsage {
  const u = rollWindows(state, now);
  const [minute, day] = windowsOf(u, policy ?? { perMinute: 0, perDay: 0 });
  return {
    policy,
    minute: { count: u.minuteCount, limit: policy?.perMinute ?? null, resetAt: minute!.resetAt },
    day: { count: u.dayCount, limit: policy?.perDay ?? null, resetAt: day!.resetAt },
    bannedUntil: u.bannedUntil > now ? u.bannedUntil : null,
  };
}

/** A key that keeps sending while throttled: more refusals in one minute than its per-minute limit (at least 10). */
export function banThreshold(perMinute: number): number {
  return Math.max(10, perMinute);
}

/** When a banned key's request could succeed: the ban's end, or a used-up window's later reset. */
export function bannedRetryAt(state: UsageState, policy: Limits): number {
  const exhaustedResets = windowsOf(state, policy)
    .filter((w) => w.remaining === 0)
    .map((w) => w.resetAt);
  return Math.max(state.bannedUntil, ...exhaustedResets);
}

/** Decides one request. A refusal counts in neither window, only towards the ban. */
export function decide(
  previous: UsageState,
  policy: Policy,
  now: number,
  banMs: number,
): { state: UsageState; decision: KeyDecision } {
  let state = rollWindows(previous, now);
  const base = () => ({ windows: windowsOf(state, policy), now, policyVersion: policy.version });
  const refuse = (outcome: Refusal, retryAt: number) => ({
    state,
    decision: { ...base(), outcome, retryAt },
  });

  if (policy.revoked) return { state, decision: { ...base(), outcome: "revoked" } };
  if (state.bannedUntil > now) return refuse("key_banned", bannedRetryAt(state, policy));

  const dayFull = state.dayCount >= policy.perDay;
  const minuteFull = state.minuteCount >= policy.perMinute;
  if (!dayFull && !minuteFull) {
    state = { ...state, minuteCount: state.minuteCount + 1, dayCount: state.dayCount + 1 };
    return { state, decision: { ...base(), outcome: "allowed" } };
  }

  state = { ...state, minuteRejected: state.minuteRejected + 1 };
  if (state.minuteRejected > banThreshold(policy.perMinute)) {
    state = { ...state, bannedUntil: now + banMs };
    return refuse("key_banned", bannedRetryAt(state, policy));
  }
  return dayFull
    ? refuse("quota_exceeded", state.dayStart + DAY_MS)
    : refuse("rate_limited", state.minuteStart + MINUTE_MS);
}

/** Failed authentications a client may make per minute before it gets 429. */
export const AUTH_FAILURES_PER_MINUTE = 30;

/** The per-client shield against key guessing: counts failed authentications in the minute window. */
export function countFailure(
  previous: UsageState,
  limit: number,
  now: number,
): { state: UsageState; decision: Decision } {
  let state = rollWindows(previous, now);
  const blocked = state.minuteCount >= limit;
  if (!blocked) state = { ...state, minuteCount: state.minuteCount + 1 };
  const minute = windowsOf(state, { perMinute: limit, perDay: Number.MAX_SAFE_INTEGER })[0]!;
  const decision: Decision = blocked
    ? { outcome: "rate_limited", windows: [minute], retryAt: minute.resetAt, now }
    : { outcome: "allowed", windows: [minute], now };
  return { state, decision };
}
