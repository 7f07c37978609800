// The fail-open rule (src/quota/fail-open.ts), without an object.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { fallbackVerdict } from "../src/quota/fail-open";
import { T0 } from "./helpers";

const limits = (perMinute: number, perDay: number) => ({ perMinute, perDay });

describe("fallbackVerdict (limiter unreachable)", () => {
  const fresh = { minuteStart: 0, admitted: 0 };

  it("lets through at most the per-minute limit in one minute window", () => {
    let state = fresh;
    for (let i = 0; i < 3; i++) {
      const v = fallbackVerdict(state, limits(3, 1000), 0, T0 + i);
      if (!v.admit) throw new Error(`refused request ${i}`);
      state = v.state;
    }
    expect(fallbackVerdict(state, limits(3, 1000), 0, T0 + 10_000)).toEqual({
      admit: false,
      reason: "allowance_used",
      retryAt: T0 + MINUTE_MS,
    });
    expect(fallbackVerdict(state, limits(3, 1000), 0, T0 + MINUTE_MS).admit).toBe(true);
  });

  it("lets nothing through for a key refused in this isolate until that refusal's retryAt", () => {
    const until = T0 + 30_000;
    expect(fallbackVerdict(fresh, limits(3, 1000), until, T0)).toEqual({
      admit: false,
      reason: "refused_before",
      retryAt: until,
    });
    expect(fallbackVerdict(fresh, limits(3, 1000), until, until).admit).toBe(true);
  });
});
