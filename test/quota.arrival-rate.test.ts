// Rate estimation (src/quota/arrival-rate.ts): how busy a key is in one holder.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import {
  ArrivalRate,
  leaseWanted,
  RATE_HORIZON_MS,
  RECENT_GAPS_MS,
} from "../src/quota/arrival-rate";
import { ISOLATE_LEASE_MS, STOCK_LEASE_MS } from "../src/quota/lease";
import { T0 } from "./helpers";

// An isolate's lease lifetime: the one most leases are sized for.
const L = ISOLATE_LEASE_MS;

describe("leaseWanted", () => {
  // Arrival times `n` requests, `gapMs` apart, the last one at `last`.
  const spaced = (n: number, gapMs: number, last = T0) =>
    Array.from({ length: n }, (_, i) => last - (n - 1 - i) * gapMs);

  it("asks for nothing for a quiet key: under two requests in the last second and on average", () => {
    expect(leaseWanted([], T0, L)).toBe(0);
    expect(leaseWanted([T0], T0, L)).toBe(0);
    // One request every 2 s, or a free key at its full rate (one a second): never a lease.
    expect(leaseWanted(spaced(5, 2_000), T0, L)).toBe(0);
    expect(leaseWanted(spaced(10, 1_000), T0, L)).toBe(0);
    // Requests older than the horizon do not count.
    expect(leaseWanted([...spaced(100, 10, T0 - RATE_HORIZON_MS), T0], T0, L)).toBe(0);
  });

  it("asks for a lease lifetime's worth of requests at the rate of the last second", () => {
    expect(leaseWanted([T0 - 500, T0], T0, L)).toBe(Math.ceil((2 * L) / 1_000));
    expect(leaseWanted(spaced(37, 25), T0, L)).toBe(Math.ceil((37 * L) / 1_000));
    // A location holder's stock lives longer, and is sized for its lifetime.
    expect(leaseWanted(spaced(37, 25), T0, STOCK_LEASE_MS)).toBe(
      Math.ceil((37 * STOCK_LEASE_MS) / 1_000),
    );
  });

  it("sizes from the average over the horizon when that is higher (a key that paused)", () => {
    // 300 requests at 100/s ending 3 s ago, then one now: 301 over 6 s ≈ 50.2/s.
    const arrivals = [...spaced(300, 10, T0 - 3_000), T0];
    expect(leaseWanted(arrivals, T0, L)).toBe(Math.ceil(((301 * 1_000) / 5_990) * (L / 1_000)));
  });

  it("counts the arrivals of the last RATE_HORIZON_MS up to now: busy from two a second on average", () => {
    // 20 requests in the horizon, none in the last second: exactly two a second on average.
    const twenty = spaced(20, 450, T0 - 1_000);
    expect(leaseWanted(twenty, T0, L)).toBe(Math.ceil(((20 * 1_000) / 9_550) * (L / 1_000)));
    // 19 of them, and one exactly RATE_HORIZON_MS old: out of the horizon, so under two a second.
    const nineteen = spaced(19, 450, T0 - 1_000);
    expect(leaseWanted([T0 - RATE_HORIZON_MS, ...nineteen], T0, L)).toBe(0);
    // Arrivals stamped after `now` (a clock read later than the one sizing the lease) do not count.
    expect(leaseWanted(spaced(40, 10, T0 + 500), T0, L)).toBe(0);
  });

  it("sizes from the last second when the key speeds up", () => {
    // 1/s for 9 s, then 50 in the last second.
    const arrivals = [...spaced(9, 1_000, T0 - 1_000), ...spaced(50, 10)];
    expect(leaseWanted(arrivals, T0, L)).toBe(Math.ceil((50 * L) / 1_000));
  });
});

describe("ArrivalRate", () => {
  it("sizes a lease from the requests noted within RATE_HORIZON_MS only", () => {
    const rate = new ArrivalRate();
    for (let i = 0; i < 20; i++) rate.note(T0 - RATE_HORIZON_MS + i * 10);
    // 20 requests 10 ms apart, all still within the horizon: busy.
    expect(rate.leaseWanted(T0 - RATE_HORIZON_MS + 200, L)).toBeGreaterThan(0);
    // Once they are older than the horizon, the key is quiet again.
    expect(rate.leaseWanted(T0 + 1_000, L)).toBe(0);
  });

  it("keeps the latest 2,000 arrivals, and sizes from those", () => {
    // Sized for a location holder's stock: a lifetime long enough for the test to tell.
    const rate = new ArrivalRate();
    const arrivals = Array.from({ length: 3_000 }, (_, i) => T0 - 2_999 + i);
    for (const t of arrivals) rate.note(t);
    const latest = arrivals.slice(-2_000);
    expect(leaseWanted(latest, T0, STOCK_LEASE_MS)).not.toBe(
      leaseWanted(arrivals, T0, STOCK_LEASE_MS),
    ); // the test can tell
    expect(rate.leaseWanted(T0, STOCK_LEASE_MS)).toBe(leaseWanted(latest, T0, STOCK_LEASE_MS));
  });

  it("keeps exactly the latest 2,000: the oldest one kept sets the span the rate is averaged over", () => {
    const rate = new ArrivalRate();
    // 2,001 arrivals, all over a second old: three spread out, then 1,998 at once.
    const arrivals = [T0 - 9_500, T0 - 9_000, T0 - 5_000, ...Array(1_998).fill(T0 - 2_000)];
    for (const t of arrivals) rate.note(t);
    const latest = arrivals.slice(-2_000); // from T0 - 9 s: about 222 a second
    expect(leaseWanted(latest, T0, L)).not.toBe(leaseWanted(arrivals.slice(-1_999), T0, L));
    expect(rate.leaseWanted(T0, L)).toBe(leaseWanted(latest, T0, L));
  });

  it("sizes a lease exactly as leaseWanted does over the same arrivals", () => {
    const rate = new ArrivalRate();
    const arrivals = Array.from({ length: 37 }, (_, i) => T0 - (36 - i) * 25);
    for (const t of arrivals) rate.note(t);
    expect(rate.leaseWanted(T0, L)).toBe(leaseWanted(arrivals, T0, L));
    expect(rate.leaseWanted(T0, L)).toBe(Math.ceil((37 * L) / 1_000));
  });
});

describe("ArrivalRate's recent gaps (when the key's next request is expected)", () => {
  const noted = (arrivals: number[]) => {
    const rate = new ArrivalRate();
    for (const t of arrivals) rate.note(T0 + t);
    return rate;
  };
  const pairs = (everyMs: number, count: number) =>
    Array.from({ length: count }, (_, i) => [i * everyMs, i * everyMs + 100]).flat();

  it("a key calling evenly: its longest recent gap and its spacing are its gap", () => {
    const rate = noted([0, 10_000, 20_000, 30_000]);
    expect(rate.gapMs).toBe(10_000);
    expect(rate.longestGapMs).toBe(10_000);
    expect(rate.spacingMs).toBe(10_000);
  });

  it("pairs 100 ms apart: the gap between pairs, and one request per half of it", () => {
    const every10s = noted(pairs(10_000, 6));
    expect(every10s.gapMs).toBe(100);
    expect(every10s.longestGapMs).toBe(9_900);
    expect(every10s.spacingMs).toBe(5_000);
    const everyMinute = noted(pairs(MINUTE_MS, 3));
    expect(everyMinute.longestGapMs).toBe(MINUTE_MS - 100);
    expect(everyMinute.spacingMs).toBe(MINUTE_MS / 2);
  });

  it("only gaps ending within RECENT_GAPS_MS of the last request count", () => {
    // A 5-minute gap, then requests every 10 s: it counts while it ended a minute ago or less.
    const longGapThen = (n: number) => [
      0,
      ...Array.from({ length: n }, (_, i) => 300_000 + i * 10_000),
    ];
    expect(RECENT_GAPS_MS).toBe(MINUTE_MS);
    expect(noted(longGapThen(7)).longestGapMs).toBe(300_000); // ended 60 s before the last
    expect(noted(longGapThen(8)).longestGapMs).toBe(10_000); // 70 s before
    expect(noted(longGapThen(8)).spacingMs).toBe(10_000);
  });

  it("none yet: 0; restored from a last arrival and its gap: that gap", () => {
    expect(noted([0]).longestGapMs).toBe(0);
    expect(noted([0]).spacingMs).toBe(0);
    const rate = noted(pairs(10_000, 3));
    rate.restore(T0 + 50_000, 40_000);
    expect(rate.longestGapMs).toBe(40_000);
    rate.note(T0 + 50_100);
    expect([rate.gapMs, rate.longestGapMs, rate.spacingMs]).toEqual([100, 40_000, 20_050]);
  });
});
