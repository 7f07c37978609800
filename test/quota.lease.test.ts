// The pure lease rules (src/quota/lease.ts), without an object.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import {
  GIVE_BACK_GRACE_MS,
  givePermitsBack,
  grantedForTheMinute,
  heldBound,
  ISOLATE_LEASE_MS,
  leaseExpiry,
  leaseLifetimeMs,
  MINUTE_STOCK_ROOM_SHARE,
  MINUTE_TAIL_MS,
  permitsToLease,
  RENEW_AHEAD_MARGIN,
  RENEW_AHEAD_MAX_MS,
  RENEW_AHEAD_MIN_MS,
  RENEWALS_TIMED,
  RenewAhead,
  renewsNow,
  STOCK_LEASE_MS,
  STOCK_RENEW_AHEAD_MS,
  stockLivesTheMinute,
  takePermits,
} from "../src/quota/lease";
import { EMPTY_USAGE, rollWindows, windowsOf } from "../src/quota/windows";
import { DAY0, MIDNIGHT, T0 } from "./helpers";

const limits = (perMinute: number, perDay: number) => ({ perMinute, perDay });
const used = (minuteCount: number, dayCount: number, now = T0) => ({
  ...rollWindows(EMPTY_USAGE, now),
  minuteCount,
  dayCount,
});

describe("permitsToLease", () => {
  const windows = (perMinute: number, perDay: number, minuteCount: number, dayCount: number) =>
    windowsOf(used(minuteCount, dayCount), limits(perMinute, perDay));

  it("grants what was asked when there is plenty of room", () => {
    expect(permitsToLease(windows(1000, 100_000, 0, 0), limits(1000, 100_000), 20)).toBe(20);
  });

  it("never grants more than a tenth of the per-minute limit: a free key locks up at most 6", () => {
    expect(permitsToLease(windows(60, 1000, 1, 1), limits(60, 1000), 50)).toBe(6);
  });

  it("never grants more than a quarter of the room left in the tighter window", () => {
    // Minute: 1000 − 900 = 100 left → 25. Day: 100,000 − 99,960 = 40 left → 10.
    expect(permitsToLease(windows(1000, 100_000, 900, 900), limits(1000, 100_000), 80)).toBe(25);
    expect(permitsToLease(windows(1000, 100_000, 0, 99_960), limits(1000, 100_000), 80)).toBe(10);
  });

  it("grants nothing near the limit, so the isolate goes back to one call per request", () => {
    expect(permitsToLease(windows(1000, 100_000, 997, 997), limits(1000, 100_000), 80)).toBe(0);
    expect(permitsToLease(windows(1000, 100_000, 1000, 1000), limits(1000, 100_000), 80)).toBe(0);
  });

  it("grants nothing to a key that asked for none", () => {
    expect(permitsToLease(windows(1000, 100_000, 0, 0), limits(1000, 100_000), 0)).toBe(0);
  });

  it("a renewal tops the isolate up to a tenth of the per-minute limit, never past it", () => {
    // Free key: at most 6 unused in one isolate; holding 4, a renewal adds at most 2.
    expect(permitsToLease(windows(60, 1000, 10, 10), limits(60, 1000), 50, 4)).toBe(2);
    expect(permitsToLease(windows(60, 1000, 10, 10), limits(60, 1000), 50, 6)).toBe(0);
    expect(permitsToLease(windows(60, 1000, 10, 10), limits(60, 1000), 50, 9)).toBe(0);
    // Plenty of room: the want decides.
    expect(permitsToLease(windows(1000, 100_000, 0, 0), limits(1000, 100_000), 30, 40)).toBe(30);
  });

  it("counts what the key's other leases hold against the same bound", () => {
    // Free key: 6 at most across all its leases; 4 held elsewhere leave 2, minus what the caller holds.
    expect(permitsToLease(windows(60, 1000, 10, 10), limits(60, 1000), 50, 0, 4)).toBe(2);
    expect(permitsToLease(windows(60, 1000, 10, 10), limits(60, 1000), 50, 1, 4)).toBe(1);
    expect(permitsToLease(windows(60, 1000, 10, 10), limits(60, 1000), 50, 0, 6)).toBe(0);
  });
});

describe("lease lifetimes", () => {
  it("an isolate's own lease lives under 2 s: a change reaches a busy isolate within 2 s", () => {
    expect(leaseLifetimeMs(null)).toBe(ISOLATE_LEASE_MS);
    expect(ISOLATE_LEASE_MS).toBeLessThan(2_000);
    // Its unused permits are back within 2 s of its grant too.
    expect(ISOLATE_LEASE_MS + GIVE_BACK_GRACE_MS).toBeLessThanOrEqual(2_000);
  });

  it("a location holder's stock, with the give-back's grace, is back within 5 s of its grant", () => {
    expect(leaseLifetimeMs("key_1@AMS")).toBe(STOCK_LEASE_MS);
    expect(STOCK_LEASE_MS + GIVE_BACK_GRACE_MS).toBeLessThanOrEqual(5_000);
  });

  it("a stock for the minute lives to its minute's end, only for a location holder", () => {
    expect(leaseLifetimeMs("key_1@AMS", { forTheMinute: true })).toBe(MINUTE_MS);
    expect(leaseExpiry(used(0, 0), T0 + 5_000, MINUTE_MS)).toBe(T0 - (T0 % MINUTE_MS) + MINUTE_MS);
    // An isolate's own lease is never longer: nothing can push a change to an isolate.
    expect(leaseLifetimeMs(null, { forTheMinute: true })).toBe(ISOLATE_LEASE_MS);
    // The holder tells one from the object's answer.
    expect(grantedForTheMinute(T0 + STOCK_LEASE_MS, T0)).toBe(false);
    expect(grantedForTheMinute(T0 + STOCK_LEASE_MS + 1, T0)).toBe(true);
  });

  it("a stock lives the minute only while the key is far from both limits (MINUTE_STOCK_ROOM_SHARE × heldBound left after it)", () => {
    const free = limits(60, 1_000); // heldBound 6: 24 left after the grant
    const far = MINUTE_STOCK_ROOM_SHARE * heldBound(free);
    expect(far).toBe(24);
    const windows = (minuteCount: number, dayCount: number) =>
      windowsOf(used(minuteCount, dayCount), free);
    expect(stockLivesTheMinute(windows(60 - far - 2, 0), free, 2)).toBe(true);
    expect(stockLivesTheMinute(windows(60 - far - 1, 0), free, 2)).toBe(false);
    // The day binds as much as the minute.
    expect(stockLivesTheMinute(windows(0, 1_000 - far - 2), free, 2)).toBe(true);
    expect(stockLivesTheMinute(windows(0, 1_000 - far - 1), free, 2)).toBe(false);
  });

  it("an isolate renews ahead by twice its slowest recent renewal (100 ms to half the lease's life), a location holder half its stock's life", () => {
    expect([RENEW_AHEAD_MARGIN, RENEWALS_TIMED, RENEW_AHEAD_MIN_MS]).toEqual([2, 4, 100]);
    expect(RENEW_AHEAD_MAX_MS).toBe(ISOLATE_LEASE_MS / 2);
    expect(STOCK_RENEW_AHEAD_MS).toBe(STOCK_LEASE_MS / 2);
  });
});

describe("RenewAhead", () => {
  it("an isolate's: half the lease's life until a renewal is answered, then twice the slowest of its last four", () => {
    const ahead = new RenewAhead();
    expect(ahead.ms).toBe(RENEW_AHEAD_MAX_MS);
    ahead.answered(100);
    expect(ahead.ms).toBe(200);
    ahead.answered(180); // the slowest of the last four
    for (const ms of [90, 110, 100]) {
      expect(ahead.ms).toBe(360);
      ahead.answered(ms);
    }
    expect(ahead.ms, "the 180 ms renewal is the fourth from last").toBe(360);
    ahead.answered(120);
    expect(ahead.ms, "the 180 ms renewal is five renewals old").toBe(240);
  });

  it("within its bounds: 100 ms for an object nearby, half the lease's life for one far away", () => {
    const near = new RenewAhead();
    near.answered(5);
    expect(near.ms).toBe(RENEW_AHEAD_MIN_MS);
    const far = new RenewAhead();
    far.answered(600);
    expect(far.ms).toBe(RENEW_AHEAD_MAX_MS);
  });

  it("a location holder's stock: its fixed time, whatever its renewals take", () => {
    const stock = new RenewAhead(STOCK_RENEW_AHEAD_MS);
    stock.answered(100);
    expect(stock.ms).toBe(STOCK_RENEW_AHEAD_MS);
  });
});

describe("renewsNow", () => {
  const minuteEnd = T0 + MINUTE_MS;
  const lease = (left: number, lastGrant: number, expiresAt: number) => ({
    left,
    lastGrant,
    expiresAt,
  });

  it("once half of the last grant is used", () => {
    expect(renewsNow(lease(11, 20, T0 + ISOLATE_LEASE_MS), minuteEnd, T0)).toBe(false);
    expect(renewsNow(lease(10, 20, T0 + ISOLATE_LEASE_MS), minuteEnd, T0)).toBe(true);
    expect(renewsNow(lease(1, 20, T0 + ISOLATE_LEASE_MS), minuteEnd, T0)).toBe(true);
  });

  it("`aheadMs` before the lease expires (half its life by default), unless it ends with its minute", () => {
    const expiresAt = T0 + ISOLATE_LEASE_MS;
    const aheadMs = 200;
    const at = (now: number) => renewsNow(lease(19, 20, expiresAt), minuteEnd, now, { aheadMs });
    expect(at(expiresAt - aheadMs - 1)).toBe(false);
    expect(at(expiresAt - aheadMs)).toBe(true);
    const byDefault = (now: number) => renewsNow(lease(19, 20, expiresAt), minuteEnd, now);
    expect(byDefault(expiresAt - RENEW_AHEAD_MAX_MS - 1)).toBe(false);
    expect(byDefault(expiresAt - RENEW_AHEAD_MAX_MS)).toBe(true);
    // A lease that ends with the minute window: a renewal could not last longer.
    expect(renewsNow(lease(19, 20, minuteEnd), minuteEnd, minuteEnd - 500)).toBe(false);
  });

  it("an isolate's lease: by the request before the one that, at the key's last gap, would come after the renewal is due", () => {
    const expiresAt = T0 + ISOLATE_LEASE_MS;
    const dueAt = expiresAt - 200;
    const at = (now: number, gapMs: number) =>
      renewsNow(lease(19, 20, expiresAt), minuteEnd, now, { aheadMs: 200, gapMs });
    // A key at 2.2 requests a second: the request 455 ms before the renewal is due sends it, not
    // the one 456 ms before (its successor, at that gap, is still in time).
    expect(at(dueAt - 456, 455)).toBe(false);
    expect(at(dueAt - 455, 455)).toBe(true);
    // Busy: a gap of 10 ms, 10 ms sooner.
    expect(at(dueAt - 11, 10)).toBe(false);
    expect(at(dueAt - 10, 10)).toBe(true);
    // A location holder's stock (renewed half its life ahead): by its expiry alone.
    const stock = (now: number) =>
      renewsNow(lease(19, 20, expiresAt), minuteEnd, now, { aheadMs: 200, gapMs: 455, stock: 2 });
    expect(stock(dueAt - 1)).toBe(false);
    expect(stock(dueAt)).toBe(true);
  });

  it("a busy isolate's lease (used at its rate, not yet half used): `aheadMs` before its expiry, not at half its life", () => {
    // Renewed at T0 (a new expiry 1,750 ms on) with 20 permits, the key's rate for a lease's
    // life, on top of the 10 it still held: 30. At that rate it has used 10 at half its life and
    // 16 by 1,550 ms, never half of the last grant: only its expiry is due (200 ms ahead: its
    // renewals take 100 ms).
    const expiresAt = T0 + 1_750;
    const at = (left: number, now: number) =>
      renewsNow(lease(left, 20, expiresAt), minuteEnd, now, { aheadMs: 200 });
    expect(at(20, T0 + 875)).toBe(false);
    expect(at(14, T0 + 1_549)).toBe(false);
    expect(at(14, T0 + 1_550)).toBe(true);
    expect(at(11, T0 + 1_749)).toBe(true);
  });

  it("a location holder's stock: STOCK_RENEW_AHEAD_MS before it expires, unless it ends with its minute", () => {
    const stock = { aheadMs: STOCK_RENEW_AHEAD_MS };
    const expiresAt = T0 + STOCK_LEASE_MS;
    expect(
      renewsNow(lease(19, 20, expiresAt), minuteEnd, expiresAt - STOCK_RENEW_AHEAD_MS, stock),
    ).toBe(true);
    // Ending with the minute, 2 s before its end (outside the minute's last MINUTE_TAIL_MS).
    expect(renewsNow(lease(19, 20, minuteEnd), minuteEnd, minuteEnd - 2_000, stock)).toBe(false);
  });

  it("a stock for the minute: never ahead of its expiry, only once used up, if the key's last gap fits in the minute", () => {
    const forTheMinute = (left: number, expiresAt: number) => ({
      ...lease(left, 2, expiresAt),
      forTheMinute: true,
    });
    // Its expiry, by this holder's clock, is a round trip before the minute's end.
    const expiresAt = minuteEnd - 100;
    const at = (gapMs: number) => ({ aheadMs: STOCK_RENEW_AHEAD_MS, stock: 2, gapMs });
    const early = expiresAt - 20_000;
    expect(renewsNow(forTheMinute(2, expiresAt), minuteEnd, expiresAt - 2_000, at(0))).toBe(false);
    expect(renewsNow(lease(2, 2, expiresAt), minuteEnd, expiresAt - 2_000, at(0))).toBe(true);
    expect(renewsNow(forTheMinute(1, expiresAt), minuteEnd, early, at(10_000))).toBe(false);
    expect(renewsNow(forTheMinute(0, expiresAt), minuteEnd, early, at(10_000))).toBe(true);
    // The key's next request, at its last gap, would come after the minute: the refill serves it.
    expect(renewsNow(forTheMinute(0, expiresAt), minuteEnd, early, at(20_000))).toBe(false);
  });

  it("a lease that would expire in the minute's last MINUTE_TAIL_MS: `aheadMs` before that tail begins", () => {
    const renews = (l: ReturnType<typeof lease>, now: number) =>
      renewsNow(l, minuteEnd, now, { aheadMs: 400 });
    // Expiring 600 ms before the minute's end (by its own expiry, due 1,000 ms before the end,
    // in the tail, where no renewal goes out): due 1,400 ms before the end instead.
    const inTheTail = lease(15, 20, minuteEnd - 600);
    expect(renews(inTheTail, minuteEnd - 1_401)).toBe(false);
    expect(renews(inTheTail, minuteEnd - 1_400)).toBe(true);
    expect(renews(inTheTail, minuteEnd - 1_001)).toBe(true);
    expect(renews(inTheTail, minuteEnd - 1_000)).toBe(false);
    // Ending with its minute by this holder's clock (a one-way trip before the object's minute
    // end): no renewal would extend it.
    const withTheMinute = lease(15, 20, minuteEnd - 50);
    expect(renews(withTheMinute, minuteEnd - 1_400)).toBe(false);
    expect(renews(withTheMinute, minuteEnd - 1_001)).toBe(false);
    // Expiring before the tail: by its own expiry, as ever.
    const beforeTheTail = lease(15, 20, minuteEnd - 1_200);
    expect(renews(beforeTheTail, minuteEnd - 1_601)).toBe(false);
    expect(renews(beforeTheTail, minuteEnd - 1_600)).toBe(true);
  });

  it("never in the minute's last MINUTE_TAIL_MS, even half used", () => {
    const late = lease(1, 20, minuteEnd);
    expect(renewsNow(late, minuteEnd, minuteEnd - MINUTE_TAIL_MS - 1)).toBe(true);
    expect(renewsNow(late, minuteEnd, minuteEnd - MINUTE_TAIL_MS)).toBe(false);
  });

  it("not a lease that is over (expired or used up): the next request asks the object", () => {
    expect(renewsNow(lease(0, 20, T0 + ISOLATE_LEASE_MS), minuteEnd, T0)).toBe(false);
    expect(renewsNow(lease(5, 20, T0 + ISOLATE_LEASE_MS), minuteEnd, T0 + ISOLATE_LEASE_MS)).toBe(
      false,
    );
  });
});

describe("leaseExpiry", () => {
  it("lasts the lifetime of the lease's tier", () => {
    expect(leaseExpiry(used(0, 0), T0 + 5_000, ISOLATE_LEASE_MS)).toBe(
      T0 + 5_000 + ISOLATE_LEASE_MS,
    );
    expect(leaseExpiry(used(0, 0), T0 + 5_000, STOCK_LEASE_MS)).toBe(T0 + 5_000 + STOCK_LEASE_MS);
  });

  it("ends with its minute window, so a permit never crosses into the next minute or day", () => {
    const now = MIDNIGHT - 300;
    expect(leaseExpiry(used(0, 0, now), now, ISOLATE_LEASE_MS)).toBe(MIDNIGHT);
  });
});

describe("takePermits and givePermitsBack", () => {
  const lease = { minuteStart: T0, dayStart: DAY0, permits: 10 };

  it("counts granted permits in both windows and credits unused ones back exactly", () => {
    const granted = takePermits(used(5, 50), 10);
    expect(granted).toMatchObject({ minuteCount: 15, dayCount: 60 });
    expect(givePermitsBack(granted, lease, 4)).toMatchObject({ minuteCount: 11, dayCount: 56 });
  });

  it("never credits more than the lease held", () => {
    expect(givePermitsBack(used(15, 60), lease, 99)).toMatchObject({
      minuteCount: 5,
      dayCount: 50,
    });
  });

  it("credits only the day once the minute the lease was granted in is over", () => {
    // Three requests admitted in the new minute, which the lease's permits were not part of.
    const nextMinute = takePermits(rollWindows(used(15, 60), T0 + MINUTE_MS), 3);
    expect(givePermitsBack(nextMinute, lease, 4)).toMatchObject({ minuteCount: 3, dayCount: 59 });
  });

  it("credits nothing once the day is over too", () => {
    const nextDay = takePermits(rollWindows(used(15, 60), MIDNIGHT), 3);
    expect(givePermitsBack(nextDay, lease, 4)).toMatchObject({ minuteCount: 3, dayCount: 3 });
  });
});
