import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { bindingWindow, rateLimitHeaders } from "../src/quota/headers";
import {
  bannedRetryAt,
  banThreshold,
  countFailure,
  type Decision,
  decide,
  EMPTY_USAGE,
  type Policy,
  rollWindows,
  type UsageState,
  type WindowStatus,
} from "../src/quota/windows";
import { BAN_MS, DAY0, MIDNIGHT, retryAtOf, T0 } from "./helpers";

const policy = (perMinute: number, perDay: number, extra: Partial<Policy> = {}): Policy => ({
  perMinute,
  perDay,
  version: 1,
  revoked: false,
  ...extra,
});

/** Runs `n` requests at `now`, returning the final state and every decision. */
function run(
  state: UsageState,
  p: Policy,
  now: number,
  n: number,
): { state: UsageState; decisions: Decision[] } {
  const decisions: Decision[] = [];
  for (let i = 0; i < n; i++) {
    const r = decide(state, p, now, BAN_MS);
    state = r.state;
    decisions.push(r.decision);
  }
  return { state, decisions };
}

const win = (name: "minute" | "day", remaining: number, limit = 10): WindowStatus => ({
  name,
  limit,
  remaining,
  resetAt: name === "minute" ? T0 + MINUTE_MS : DAY0 + DAY_MS,
  seconds: name === "minute" ? 60 : 86_400,
});

describe("rollWindows", () => {
  const s: UsageState = {
    minuteStart: T0,
    minuteCount: 4,
    minuteRejected: 2,
    dayStart: DAY0,
    dayCount: 40,
    bannedUntil: 0,
  };

  it("keeps the state within the same minute, up to its last millisecond", () => {
    expect(rollWindows(s, T0)).toBe(s);
    expect(rollWindows(s, T0 + MINUTE_MS - 1)).toBe(s);
  });

  it("starts a new minute at hh:mm:00 exactly, keeping the day count", () => {
    expect(rollWindows(s, T0 + MINUTE_MS)).toEqual({
      ...s,
      minuteStart: T0 + MINUTE_MS,
      minuteCount: 0,
      minuteRejected: 0,
    });
  });

  it("starts a new day at 00:00:00 UTC exactly", () => {
    const lastMinute = { ...s, minuteStart: DAY0 + DAY_MS - MINUTE_MS };
    expect(rollWindows(lastMinute, DAY0 + DAY_MS - 1)).toBe(lastMinute);
    expect(rollWindows(lastMinute, DAY0 + DAY_MS)).toEqual({
      minuteStart: DAY0 + DAY_MS,
      minuteCount: 0,
      minuteRejected: 0,
      dayStart: DAY0 + DAY_MS,
      dayCount: 0,
      bannedUntil: 0,
    });
  });

  it("only moves forward: a clock that steps back stays in the windows it reached", () => {
    // An NTP correction takes the clock from the new minute back into the one before (and from
    // the new day into the day before): the windows it reached keep their counts.
    const newMinute = rollWindows(s, T0 + MINUTE_MS);
    expect(rollWindows(newMinute, T0 + MINUTE_MS - 2)).toBe(newMinute);
    const newDay = { ...s, minuteStart: MIDNIGHT, dayStart: MIDNIGHT, dayCount: 3, minuteCount: 3 };
    expect(rollWindows(newDay, MIDNIGHT - 1)).toBe(newDay);
    // And a request decided meanwhile is counted in them, under their limits.
    const full = { ...s, minuteStart: T0 + MINUTE_MS, minuteCount: 10 };
    const { decision } = decide(full, policy(10, 1000), T0 + MINUTE_MS - 500, BAN_MS);
    expect(decision.outcome).toBe("rate_limited");
    expect(retryAtOf(decision)).toBe(T0 + 2 * MINUTE_MS);
  });

  it("aligns an empty state to the current windows", () => {
    const r = rollWindows(EMPTY_USAGE, T0 + 12_345);
    expect(r).toMatchObject({ minuteStart: T0, dayStart: DAY0, minuteCount: 0, dayCount: 0 });
  });
});

describe("decide", () => {
  it("increments both windows together when admitting", () => {
    const { state, decisions } = run(EMPTY_USAGE, policy(5, 100), T0 + 1_000, 3);
    expect(decisions.map((d) => d.outcome)).toEqual(["allowed", "allowed", "allowed"]);
    expect(state).toMatchObject({ minuteCount: 3, dayCount: 3, minuteRejected: 0 });
    expect(decisions[2]!.windows).toEqual([
      { name: "minute", limit: 5, remaining: 2, resetAt: T0 + MINUTE_MS, seconds: 60 },
      { name: "day", limit: 100, remaining: 97, resetAt: DAY0 + DAY_MS, seconds: 86_400 },
    ]);
  });

  it("refuses past the per-minute limit with rate_limited until the minute ends, counting neither window", () => {
    const full = run(EMPTY_USAGE, policy(3, 100), T0, 3).state;
    const { state, decision } = decide(full, policy(3, 100), T0 + 59_999, BAN_MS);
    expect(decision.outcome).toBe("rate_limited");
    expect(retryAtOf(decision)).toBe(T0 + MINUTE_MS);
    expect(state).toMatchObject({ minuteCount: 3, dayCount: 3, minuteRejected: 1 });
  });

  it("admits again at the next minute boundary exactly", () => {
    const full = run(EMPTY_USAGE, policy(3, 100), T0, 4).state;
    const { state, decision } = decide(full, policy(3, 100), T0 + MINUTE_MS, BAN_MS);
    expect(decision.outcome).toBe("allowed");
    expect(state).toMatchObject({
      minuteStart: T0 + MINUTE_MS,
      minuteCount: 1,
      minuteRejected: 0,
      dayCount: 4,
    });
  });

  it("refuses with quota_exceeded once the day is used, even in a fresh minute, until 00:00 UTC", () => {
    let { state } = run(EMPTY_USAGE, policy(10, 5), T0, 5);
    const r = decide(state, policy(10, 5), T0 + 5 * MINUTE_MS, BAN_MS);
    expect(r.decision.outcome).toBe("quota_exceeded");
    expect(retryAtOf(r.decision)).toBe(DAY0 + DAY_MS);
    expect(r.state).toMatchObject({ minuteCount: 0, dayCount: 5 });
    state = r.state;
    expect(decide(state, policy(10, 5), DAY0 + DAY_MS - 1, BAN_MS).decision.outcome).toBe(
      "quota_exceeded",
    );
    const next = decide(state, policy(10, 5), DAY0 + DAY_MS, BAN_MS);
    expect(next.decision.outcome).toBe("allowed");
    expect(next.state).toMatchObject({ dayStart: DAY0 + DAY_MS, dayCount: 1, minuteCount: 1 });
  });

  it("says quota_exceeded rather than rate_limited when both windows are full", () => {
    const { state } = run(EMPTY_USAGE, policy(3, 3), T0, 3);
    const r = decide(state, policy(3, 3), T0 + 1, BAN_MS);
    expect(r.decision.outcome).toBe("quota_exceeded");
    expect(retryAtOf(r.decision)).toBe(DAY0 + DAY_MS);
  });

  it("refuses a revoked key without counting anything", () => {
    const { state } = run(EMPTY_USAGE, policy(3, 10), T0, 1);
    const r = decide(state, policy(3, 10, { revoked: true }), T0 + 1, BAN_MS);
    expect(r.decision.outcome).toBe("revoked");
    expect(r.state).toMatchObject({ minuteCount: 1, dayCount: 1, minuteRejected: 0 });
  });
});

describe("ban", () => {
  it("has a threshold of max(10, perMinute)", () => {
    expect(banThreshold(1)).toBe(10);
    expect(banThreshold(10)).toBe(10);
    expect(banThreshold(60)).toBe(60);
  });

  it("bans on the refusal after max(10, perMinute) refusals in one minute window", () => {
    const p = policy(3, 1000);
    const full = run(EMPTY_USAGE, p, T0, 3).state;
    const refused = run(full, p, T0 + 10_000, 10);
    expect(refused.decisions.every((d) => d.outcome === "rate_limited")).toBe(true);
    expect(refused.state.bannedUntil).toBe(0);
    const banned = decide(refused.state, p, T0 + 10_000, BAN_MS);
    expect(banned.decision.outcome).toBe("key_banned");
    expect(retryAtOf(banned.decision)).toBe(T0 + 10_000 + BAN_MS);
    expect(banned.state).toMatchObject({
      bannedUntil: T0 + 10_000 + BAN_MS,
      minuteCount: 3,
      dayCount: 3,
    });
  });

  it("uses perMinute as the threshold when it is above 10", () => {
    const p = policy(20, 1000);
    const full = run(EMPTY_USAGE, p, T0, 20).state;
    const refused = run(full, p, T0 + 1, 20);
    expect(refused.decisions.at(-1)!.outcome).toBe("rate_limited");
    expect(decide(refused.state, p, T0 + 1, BAN_MS).decision.outcome).toBe("key_banned");
  });

  it("does not add refusals up across minute windows", () => {
    const p = policy(1, 1000);
    let { state } = run(EMPTY_USAGE, p, T0, 11); // 1 admitted, 10 refused
    ({ state } = run(state, p, T0 + MINUTE_MS, 11));
    expect(state.bannedUntil).toBe(0);
    expect(state.minuteRejected).toBe(10);
  });

  it("refuses everything while banned, then expires exactly at bannedUntil", () => {
    const p = policy(1, 1000);
    const { state } = run(EMPTY_USAGE, p, T0, 12);
    const until = T0 + BAN_MS;
    expect(state.bannedUntil).toBe(until);
    const during = decide(state, p, until - 1, BAN_MS);
    expect(during.decision.outcome).toBe("key_banned");
    expect(retryAtOf(during.decision)).toBe(until);
    expect(during.state).toMatchObject({ minuteCount: 0, dayCount: 1 });
    const after = decide(during.state, p, until, BAN_MS);
    expect(after.decision.outcome).toBe("allowed");
    expect(after.state.dayCount).toBe(2);
  });
});

describe("ban while a window is used up", () => {
  // perDay 3: three admitted, then ten refusals (quota_exceeded), and the eleventh bans.
  const p = policy(5, 3);
  const banAt = T0 + 30_000;
  const usedUpThenBanned = () => {
    const { state } = run(EMPTY_USAGE, p, T0, 3);
    const refused = run(state, p, banAt, 10);
    expect(refused.decisions.every((d) => d.outcome === "quota_exceeded")).toBe(true);
    return decide(refused.state, p, banAt, BAN_MS);
  };

  it("names the next UTC midnight, not the ban's end, when the day is used up at the ban", () => {
    const banned = usedUpThenBanned();
    expect(banned.decision.outcome).toBe("key_banned");
    expect(banned.state.bannedUntil).toBe(banAt + BAN_MS);
    expect(retryAtOf(banned.decision)).toBe(MIDNIGHT);
    const h = rateLimitHeaders(banned.decision);
    expect(h["X-RateLimit-Reset"]).toBe(String(MIDNIGHT / 1000));
    expect(h["Retry-After"]).toBe(String(Math.ceil((MIDNIGHT - banAt) / 1000)));
  });

  it("keeps naming midnight for every request during the ban", () => {
    const { state } = usedUpThenBanned();
    const during = decide(state, p, banAt + 5 * MINUTE_MS, BAN_MS);
    expect(during.decision.outcome).toBe("key_banned");
    expect(retryAtOf(during.decision)).toBe(MIDNIGHT);
  });

  it("names the ban's end when the ban outlasts every used-up window", () => {
    // Banned at 23:55 UTC: the day resets at midnight, the ban ends ten minutes later.
    const late = MIDNIGHT - 5 * MINUTE_MS;
    const { state } = run(EMPTY_USAGE, p, late, 3);
    const banned = decide(run(state, p, late, 10).state, p, late, BAN_MS);
    expect(retryAtOf(banned.decision)).toBe(late + BAN_MS);
  });

  it("bannedRetryAt ignores windows that still have room", () => {
    const state = {
      ...EMPTY_USAGE,
      minuteStart: T0,
      dayStart: DAY0,
      dayCount: 2,
      bannedUntil: T0 + BAN_MS,
    };
    expect(bannedRetryAt(state, p)).toBe(T0 + BAN_MS);
    expect(bannedRetryAt({ ...state, dayCount: 3 }, p)).toBe(MIDNIGHT);
  });
});

describe("countFailure (per-client shield)", () => {
  it("allows `limit` failures per minute, then refuses until the minute ends without counting", () => {
    let state = EMPTY_USAGE;
    for (let i = 1; i <= 30; i++) {
      const r = countFailure(state, 30, T0 + i);
      expect(r.decision.outcome).toBe("allowed");
      expect(r.decision.windows).toEqual([
        { name: "minute", limit: 30, remaining: 30 - i, resetAt: T0 + MINUTE_MS, seconds: 60 },
      ]);
      state = r.state;
    }
    const blocked = countFailure(state, 30, T0 + 59_999);
    expect(blocked.decision.outcome).toBe("rate_limited");
    expect(retryAtOf(blocked.decision)).toBe(T0 + MINUTE_MS);
    // The refusal describes the used-up window: its headers and the isolate's refusal note read it.
    expect(blocked.decision.windows).toEqual([
      { name: "minute", limit: 30, remaining: 0, resetAt: T0 + MINUTE_MS, seconds: 60 },
    ]);
    expect(blocked.state.minuteCount).toBe(30);
    const next = countFailure(blocked.state, 30, T0 + MINUTE_MS);
    expect(next.decision.outcome).toBe("allowed");
    expect(next.decision.windows[0]!.remaining).toBe(29);
  });
});

describe("bindingWindow", () => {
  it("picks the window with fewest remaining", () => {
    expect(bindingWindow([win("minute", 2), win("day", 5)]).name).toBe("minute");
    expect(bindingWindow([win("minute", 7), win("day", 3)]).name).toBe("day");
  });
  it("picks the day on a tie", () => {
    expect(bindingWindow([win("minute", 4), win("day", 4)]).name).toBe("day");
    expect(bindingWindow([win("minute", 0), win("day", 0)]).name).toBe("day");
  });
});

describe("rateLimitHeaders", () => {
  it("describes the binding window and both IETF windows on an admitted request", () => {
    const { decisions } = run(EMPTY_USAGE, policy(60, 1000), T0 + 15_000, 1);
    expect(rateLimitHeaders(decisions[0]!)).toEqual({
      "X-RateLimit-Limit": "60",
      "X-RateLimit-Remaining": "59",
      "X-RateLimit-Reset": String((T0 + MINUTE_MS) / 1000),
      "RateLimit-Policy": '"minute";q=60;w=60, "day";q=1000;w=86400',
      RateLimit: `"minute";r=59;t=45, "day";r=999;t=${(DAY0 + DAY_MS - T0 - 15_000) / 1000}`,
    });
  });

  it("rounds Retry-After up to whole seconds", () => {
    const full = run(EMPTY_USAGE, policy(1, 100), T0, 1).state;
    const h = rateLimitHeaders(decide(full, policy(1, 100), T0 + 30_500, BAN_MS).decision);
    expect(h["Retry-After"]).toBe("30");
    expect(h["X-RateLimit-Remaining"]).toBe("0");
    expect(h["X-RateLimit-Limit"]).toBe("1");
    expect(h["X-RateLimit-Reset"]).toBe(String((T0 + MINUTE_MS) / 1000));
  });

  it("gives Retry-After of at least 1", () => {
    const full = run(EMPTY_USAGE, policy(1, 100), T0, 1).state;
    expect(
      rateLimitHeaders(decide(full, policy(1, 100), T0 + 59_999, BAN_MS).decision)["Retry-After"],
    ).toBe("1");
    const d: Decision = {
      outcome: "rate_limited",
      windows: [win("minute", 0)],
      retryAt: T0,
      now: T0,
    };
    expect(rateLimitHeaders(d)["Retry-After"]).toBe("1");
  });

  it("omits Retry-After on admitted requests", () => {
    const { decisions } = run(EMPTY_USAGE, policy(5, 100), T0, 1);
    expect(rateLimitHeaders(decisions[0]!)).not.toHaveProperty("Retry-After");
  });

  it("shows the per-day limit, 0 and the next UTC midnight when the day is used up", () => {
    const p = policy(10, 4);
    const { state } = run(EMPTY_USAGE, p, T0, 4);
    const now = T0 + 3 * MINUTE_MS + 200;
    const h = rateLimitHeaders(decide(state, p, now, BAN_MS).decision);
    expect(h["X-RateLimit-Limit"]).toBe("4");
    expect(h["X-RateLimit-Remaining"]).toBe("0");
    expect(h["X-RateLimit-Reset"]).toBe(String((DAY0 + DAY_MS) / 1000));
    expect(h["Retry-After"]).toBe(String(Math.ceil((DAY0 + DAY_MS - now) / 1000)));
    expect(h.RateLimit).toBe(
      `"minute";r=10;t=60, "day";r=0;t=${Math.ceil((DAY0 + DAY_MS - now) / 1000)}`,
    );
  });

  it("shows 0 remaining, the ban end and Retry-After = rest of the ban for a banned key; RateLimit shows each window as it is", () => {
    const p = policy(1, 1000);
    const { state } = run(EMPTY_USAGE, p, T0, 12);
    const now = T0 + 5 * MINUTE_MS + 400;
    const h = rateLimitHeaders(decide(state, p, now, BAN_MS).decision);
    expect(h["X-RateLimit-Remaining"]).toBe("0");
    expect(h["X-RateLimit-Reset"]).toBe(String((T0 + BAN_MS) / 1000));
    expect(h["Retry-After"]).toBe(String(Math.ceil((T0 + BAN_MS - now) / 1000)));
    // The ban is in X-RateLimit-* and Retry-After; the IETF header keeps the real windows (a new
    // minute with its one request, and the day with 999 of 1,000 left).
    expect(h.RateLimit).toMatch(/^"minute";r=1;t=60, "day";r=999;t=\d+$/);
  });
});
