// The usage alerts' rule: which changes of a key's windows produce quota.day.warning,
// quota.day.exhausted and key.banned, without objects.
import { describe, expect, it } from "vitest";
import { alertsBetween, dayWarningAt } from "../src/quota/alerts";
import { EMPTY_USAGE, type Policy, type UsageState } from "../src/quota/windows";

const DAY = Date.UTC(2030, 5, 10);
const NOW = DAY + 3_600_000;
const policy: Policy = { perMinute: 5, perDay: 10, version: 1, revoked: false };
const at = (dayCount: number, extra: Partial<UsageState> = {}): UsageState => ({
  ...EMPTY_USAGE,
  dayStart: DAY,
  dayCount,
  ...extra,
});
const types = (before: UsageState, after: UsageState, p: Policy | null = policy) =>
  alertsBetween(before, after, p, NOW).map((a) => a.type);

describe("usage alerts", () => {
  it("warns when the day count reaches 80 % of the quota, rounded up", () => {
    expect(dayWarningAt(10)).toBe(8);
    expect(dayWarningAt(1000)).toBe(800);
    expect(dayWarningAt(3)).toBe(3);
    expect(dayWarningAt(1)).toBe(1);
    expect(types(at(6), at(7))).toEqual([]);
    expect(types(at(7), at(8))).toEqual(["quota.day.warning"]);
    expect(types(at(8), at(9))).toEqual([]);
  });

  it("says exhausted when the count reaches the quota, once", () => {
    expect(types(at(9), at(10))).toEqual(["quota.day.exhausted"]);
    expect(types(at(10), at(10))).toEqual([]);
  });

  it("a jump over both thresholds (a lease's permits) gives both, with the numbers", () => {
    const alerts = alertsBetween(at(5), at(10), policy, NOW);
    expect(alerts.map((a) => a.type)).toEqual(["quota.day.warning", "quota.day.exhausted"]);
    expect(alerts[0]).toEqual({
      type: "quota.day.warning",
      window: DAY,
      endsAt: DAY + 86_400_000,
      data: {
        window: "day",
        limit: 10,
        used: 10,
        remaining: 0,
        threshold: 8,
        resetAt: new Date(DAY + 86_400_000).toISOString(),
      },
    });
  });

  it("a count of an earlier day counts as zero: a new day warns again", () => {
    const yesterday = at(9, { dayStart: DAY - 86_400_000 });
    expect(types(yesterday, at(8))).toEqual(["quota.day.warning"]);
    expect(alertsBetween(yesterday, at(8), policy, NOW)[0]?.window).toBe(DAY);
  });

  it("a ban starting is key.banned, keyed by its end; a ban going on or ending is not", () => {
    const until = NOW + 15 * 60_000;
    const banned = alertsBetween(at(3), at(3, { bannedUntil: until }), policy, NOW);
    expect(banned).toEqual([
      {
        type: "key.banned",
        window: until,
        endsAt: until,
        data: {
          window: "minute",
          limit: 5,
          bannedUntil: new Date(until).toISOString(),
          resetAt: new Date(until).toISOString(),
        },
      },
    ]);
    expect(types(at(3, { bannedUntil: until }), at(4, { bannedUntil: until }))).toEqual([]);
    expect(types(at(3, { bannedUntil: until }), at(3, { bannedUntil: 0 }))).toEqual([]);
    expect(types(at(3), at(3, { bannedUntil: NOW - 1 }))).toEqual([]);
  });

  it("nothing without a policy (no limits known yet)", () => {
    expect(types(at(0), at(10), null)).toEqual([]);
  });
});
