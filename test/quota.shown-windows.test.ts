// Display state (src/quota/shown-windows.ts): the windows a lease holder's responses show.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { neverAbove, ShownWindows, windowsAfterLocalAdmissions } from "../src/quota/shown-windows";
import { EMPTY_USAGE, rollWindows, windowsOf } from "../src/quota/windows";
import { MIDNIGHT, T0 } from "./helpers";

const limits = (perMinute: number, perDay: number) => ({ perMinute, perDay });
const used = (minuteCount: number, dayCount: number, now = T0) => ({
  ...rollWindows(EMPTY_USAGE, now),
  minuteCount,
  dayCount,
});

describe("headers of local admissions", () => {
  const atContact = windowsOf(used(10, 100), limits(60, 1000));

  it("subtract what the isolate admitted since the last contact from the object's remaining", () => {
    expect(windowsAfterLocalAdmissions(atContact, 3).map((w) => w.remaining)).toEqual([47, 897]);
    expect(windowsAfterLocalAdmissions(atContact, 80).map((w) => w.remaining)).toEqual([0, 820]);
  });

  it("never go up within a window, even when the object's remaining does", () => {
    const shown = windowsAfterLocalAdmissions(atContact, 5); // 45, 895
    const higher = windowsOf(used(12, 102), limits(60, 1000)); // 48, 898: another isolate gave back
    expect(neverAbove(higher, shown).map((w) => w.remaining)).toEqual([45, 895]);
    const lower = windowsOf(used(20, 110), limits(60, 1000));
    expect(neverAbove(lower, shown).map((w) => w.remaining)).toEqual([40, 890]);
  });

  it("match each window by its name: in the day's last minute, with a per-minute limit equal to the per-day one", () => {
    // Both windows end at midnight under the same limit; only the name tells them apart.
    const lastMinute = MIDNIGHT - 30_000;
    const shown = windowsOf(used(10, 50, lastMinute), limits(100, 100)); // 90, 50
    const handedBack = windowsOf(used(5, 45, lastMinute), limits(100, 100)); // 95, 55
    expect(neverAbove(handedBack, shown).map((w) => w.remaining)).toEqual([90, 50]);
  });

  it("start afresh in a new window and under a new limit", () => {
    const shown = windowsAfterLocalAdmissions(atContact, 5);
    const nextMinute = windowsOf(rollWindows(used(10, 100), T0 + MINUTE_MS), limits(60, 1000));
    expect(neverAbove(nextMinute, shown).map((w) => w.remaining)).toEqual([60, 895]);
    const raised = windowsOf(used(12, 102), limits(300, 10_000));
    expect(neverAbove(raised, shown).map((w) => w.remaining)).toEqual([288, 9898]);
  });
});

describe("ShownWindows", () => {
  const remaining = (windows: { remaining: number }[]) => windows.map((w) => w.remaining);
  const allowed = (windows: ReturnType<typeof windowsOf>) =>
    ({ outcome: "allowed", windows, now: T0, policyVersion: 1 }) as const;

  it("shows local admissions against the last contact, and a contact starts the count afresh", () => {
    const shown = new ShownWindows();
    expect(shown.minuteEnd).toBe(Infinity);
    expect(shown.atContact, "no windows before any contact").toEqual([]);
    shown.contact(windowsOf(used(10, 100), limits(60, 1000)));
    expect(shown.minuteEnd).toBe(T0 - (T0 % MINUTE_MS) + MINUTE_MS);
    shown.admitLocally();
    expect(remaining(shown.admitLocally())).toEqual([48, 898]);
    expect(shown.admittedSinceContact).toBe(2);
    shown.contact(windowsOf(used(20, 110), limits(60, 1000)));
    expect(shown.admittedSinceContact).toBe(0);
    expect(remaining(shown.admitLocally())).toEqual([39, 889]);
  });

  it("reads a renewal's answer with the permits held at sending counted as room, in the same windows", () => {
    const shown = new ShownWindows();
    const atSending = windowsOf(used(10, 100), limits(60, 1000));
    shown.contact(atSending);
    for (let i = 0; i < 5; i++) shown.admitLocally(); // 3 admitted before sending, 2 after
    // The object had counted 10 + 4 held permits; it now counts 16 (2 more from elsewhere).
    shown.renewalAnswered(windowsOf(used(16, 106), limits(60, 1000)), {
      windows: atSending,
      holding: 4,
      admitted: 3,
    });
    expect(shown.admittedSinceContact).toBe(2);
    expect(remaining(shown.atContact)).toEqual([48, 898]);
    expect(remaining(shown.admitLocally())).toEqual([45, 895]);
  });

  it("takes a renewal's answer as it is once a window rolled over", () => {
    const shown = new ShownWindows();
    const atSending = windowsOf(used(10, 100), limits(60, 1000));
    shown.contact(atSending);
    shown.admitLocally();
    const nextMinute = windowsOf(rollWindows(used(0, 104), T0 + MINUTE_MS), limits(60, 1000));
    shown.renewalAnswered(nextMinute, { windows: atSending, holding: 4, admitted: 1 });
    expect(shown.admittedSinceContact).toBe(0);
    expect(remaining(shown.atContact)).toEqual([60, 896]);
  });

  it("takes a renewal's answer as it is once the minute rolled into the day's last one", () => {
    // Sent in the day's last minute but one, answered in its last: the new minute ends at
    // midnight, as the day sent with it did; it is a new minute all the same.
    const shown = new ShownWindows();
    const atSending = windowsOf(used(10, 100, MIDNIGHT - 90_000), limits(60, 1000));
    shown.contact(atSending);
    shown.admitLocally();
    const lastMinute = windowsOf(used(2, 104, MIDNIGHT - 30_000), limits(60, 1000));
    shown.renewalAnswered(lastMinute, { windows: atSending, holding: 4, admitted: 1 });
    expect(remaining(shown.atContact)).toEqual([58, 896]);
    expect(shown.admittedSinceContact).toBe(0);
  });

  it("never shows more remaining than before within a window", () => {
    const shown = new ShownWindows();
    expect(
      remaining(shown.show(allowed(windowsOf(used(10, 100), limits(60, 1000)))).windows),
    ).toEqual([50, 900]);
    expect(
      remaining(shown.show(allowed(windowsOf(used(8, 98), limits(60, 1000)))).windows),
    ).toEqual([50, 900]);
    expect(
      remaining(shown.show(allowed(windowsOf(used(12, 102), limits(60, 1000)))).windows),
    ).toEqual([48, 898]);
  });
});
