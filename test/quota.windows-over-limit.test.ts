// A window can hold more than its limit: a plan lowered below what the key already used today.
// Such a window shows no room left (never a negative Remaining), and counts as used up when a
// banned key is told when to come back.
import { expect, it } from "vitest";
import { bannedRetryAt, EMPTY_USAGE, windowsOf } from "../src/quota/windows";
import { BAN_MS, DAY0, MIDNIGHT, T0 } from "./helpers";

it("a window past its limit (a plan lowered) shows 0 remaining and is used up for a ban's retry", () => {
  const lowered = { perMinute: 60, perDay: 1_000 };
  const state = {
    ...EMPTY_USAGE,
    minuteStart: T0,
    minuteCount: 90,
    dayStart: DAY0,
    dayCount: 5_000,
    bannedUntil: T0 + BAN_MS,
  };
  const windows = windowsOf(state, lowered);
  expect(windows.map((w) => [w.name, w.remaining])).toEqual([
    ["minute", 0],
    ["day", 0],
  ]);
  expect(bannedRetryAt(state, lowered)).toBe(MIDNIGHT);
});
