// The rules of standing permits (docs/quotas.md, "Standing permits"), one at a time. A location
// holder's (src/quota/standing-stock.ts), by its own clock: each is usable only while its minute
// is on by the key's object's clock, which the holder's read somewhere between sending the call
// that granted it and receiving the answer; and what the holder shows of them. The key's
// object's (src/objects/standing-ledger.ts): which minutes it grants, and how long it waits for
// what was granted with them.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { STOCK_LEASE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Admission, Renewal, RenewalRequest } from "../src/quota/lease-messages";
import { newAdmissionId } from "../src/quota/lease-messages";
import {
  STANDING_MINUTES,
  STANDING_MOST_MINUTES,
  standingMinutesFrom,
  standingMinutesWanted,
} from "../src/quota/standing";
import { StandingStock } from "../src/quota/standing-stock";
import type { WindowStatus } from "../src/quota/windows";
import { allowedAt, atContact, CONTACT_LIMIT as LIMIT, renewedAt } from "./contact-answers";
import { closedGate, fixClock, policyWith, T0 } from "./helpers";

/** The object answered at ANSWERED by its clock; the holder sent at SENT and received at RECEIVED by its own (ahead by 7 s, a 100 ms trip each way). */
const ANSWERED = T0 + 30_000;
const SENT = ANSWERED + 7_000 - 100;
const RECEIVED = ANSWERED + 7_000 + 100;
const M1 = T0 + MINUTE_MS;
const M2 = T0 + 2 * MINUTE_MS;
const VERSION = 3;

const minuteOf = (windows: WindowStatus[] | null) => windows?.find((w) => w.name === "minute");

function stockOf(...grants: { minuteStart: number; permits: number }[]): StandingStock {
  const stock = new StandingStock();
  stock.add(
    grants.map((g, i) => ({ id: `s${i}`, ...g })),
    VERSION,
    ANSWERED,
    SENT,
    RECEIVED,
  );
  return stock;
}

/** By the holder's clock: the earliest its minute can have started, the latest it can have ended. */
const from = (minuteStart: number) => RECEIVED + (minuteStart - ANSWERED);
const until = (minuteStart: number) => SENT + (minuteStart + MINUTE_MS - ANSWERED);

describe("a location holder's standing permit", () => {
  it("is used only from when its minute has surely started by the object's clock (the answer's arrival plus the time to it)", () => {
    const stock = stockOf({ minuteStart: M1, permits: 2 });
    expect(stock.take(VERSION, from(M1) - 1, null, atContact(T0, 50))).toBeNull();
    expect(stock.usableAt(from(M1) - 1)).toBe(0);
    expect(stock.take(VERSION, from(M1), null, atContact(T0, 50))).not.toBeNull();
  });

  it("is not used once its minute may have ended by the object's clock (the call's sending plus the time to that end)", () => {
    const stock = stockOf({ minuteStart: M1, permits: 2 });
    expect(stock.take(VERSION, until(M1) - 1, null, atContact(T0, 50))).not.toBeNull();
    expect(stock.take(VERSION, until(M1), null, atContact(T0, 50))).toBeNull();
    expect(stock.usableAt(until(M1))).toBe(0);
  });

  it("held again after evictions, is usable the margin less at both ends of its minute, once however many times it was restored", () => {
    const stock = new StandingStock();
    stock.restore(stockOf({ minuteStart: M1, permits: 2 }).held(), 1_000);
    stock.restore(stock.held(), 1_000);
    stock.restore(stock.held(), 1_000);
    expect(stock.usableAt(from(M1) + 999)).toBe(0);
    expect(stock.usableAt(from(M1) + 1_000)).toBe(2);
    expect(stock.usableAt(until(M1) - 1_001)).toBe(2);
    expect(stock.usableAt(until(M1) - 1_000)).toBe(0);
  });

  it("shows the minute's room less the permits used in that minute only", () => {
    const stock = stockOf({ minuteStart: M1, permits: 2 }, { minuteStart: M2, permits: 2 });
    expect(minuteOf(stock.take(VERSION, from(M1), null, atContact(M1, 40)))).toMatchObject({
      remaining: LIMIT - 1,
      resetAt: M1 + MINUTE_MS,
    });
    expect(minuteOf(stock.take(VERSION, from(M2), null, atContact(M1, 40)))).toMatchObject({
      remaining: LIMIT - 1,
      resetAt: M2 + MINUTE_MS,
    });
  });

  it("counts the unused permits of the window's own minute as room, never above the limit", () => {
    const stock = stockOf({ minuteStart: M1, permits: 3 }, { minuteStart: M2, permits: 3 });
    // The object counted M1's 3 as used when M1 started: 50 left then means 53 of room here.
    expect(minuteOf(stock.withOwnRoom(atContact(M1, 50)))?.remaining).toBe(53);
    expect(minuteOf(stock.withOwnRoom(atContact(M1, LIMIT - 1)))?.remaining).toBe(LIMIT);
    // A minute no permit is held for shows no more room than the object said.
    expect(minuteOf(stock.withOwnRoom(atContact(T0, 50)))?.remaining).toBe(50);
  });

  it("is used only for a request decided under the policy version it was granted under", () => {
    const stock = stockOf({ minuteStart: M1, permits: 2 });
    // An older copy of the key goes to the key's object (told its copy is stale); a newer one too.
    expect(stock.take(VERSION - 1, from(M1), null, atContact(M1, 50))).toBeNull();
    expect(stock.take(VERSION + 1, from(M1), null, atContact(M1, 50))).toBeNull();
    expect(stock.usableAt(from(M1)), "neither took one").toBe(2);
    expect(stock.take(VERSION, from(M1), null, atContact(M1, 50))).not.toBeNull();
  });

  it("shows the windows of the last contact with only the minute's changed", () => {
    const stock = stockOf({ minuteStart: M1, permits: 2 });
    const [minute, day] = atContact(M1, 50);
    expect(stock.take(VERSION, from(M1), null, atContact(M1, 50))).toEqual([
      { ...minute, remaining: LIMIT - 1, resetAt: M1 + MINUTE_MS },
      day,
    ]);
  });

  it("reports the admission ids of the requests it served, and no others", () => {
    const stock = stockOf({ minuteStart: M1, permits: 3 }, { minuteStart: M2, permits: 1 });
    stock.take(VERSION, from(M1), "a1", atContact(M1, 50));
    stock.take(VERSION, from(M1), null, atContact(M1, 50));
    expect(stock.reports(from(M1), { all: true })).toEqual([
      { id: "s0", unused: 1, used: 2, admissionIds: ["a1"] },
      { id: "s1", unused: 1, used: 0 },
    ]);
  });

  it("held again after an eviction, reports the admission ids of the requests it served before", () => {
    const stock = stockOf({ minuteStart: M1, permits: 3 });
    stock.take(VERSION, from(M1), "a1", atContact(M1, 50));
    const kept = stock.held();
    stock.take(VERSION, from(M1), "a2", atContact(M1, 50)); // after the write: not in it
    const again = new StandingStock();
    again.restore(kept, 0);
    expect(again.reports(from(M1), { all: true })).toEqual([
      { id: "s0", unused: 2, used: 1, admissionIds: ["a1"] },
    ]);
  });

  it("used up, is reported at once (what it served is billed with the next call), not at its minute's end", () => {
    const stock = stockOf({ minuteStart: M1, permits: 1 }, { minuteStart: M2, permits: 1 });
    stock.take(VERSION, from(M1), "a1", atContact(M1, 50));
    expect(stock.reports(from(M1))).toEqual([
      { id: "s0", unused: 0, used: 1, admissionIds: ["a1"] },
    ]);
    expect(stock.unused, "M2's, not used, is kept").toBe(1);
  });

  it("is reported from the instant it may no longer be used: its minute's end by the holder's clock", () => {
    const stock = stockOf({ minuteStart: M1, permits: 2 });
    expect(stock.reports(until(M1) - 1)).toEqual([]);
    expect(stock.reports(until(M1))).toEqual([{ id: "s0", unused: 2, used: 0 }]);
  });

  it("covers the key's next requests only with permits not used yet", () => {
    const stock = stockOf({ minuteStart: M1, permits: 1 }, { minuteStart: M2, permits: 1 });
    expect(stock.coveredUntil).toBe(until(M2));
    expect(stock.take(VERSION, from(M2), null, atContact(M2, 50))).not.toBeNull();
    // M2's permit is used: only M1's, unused, still counts (as the holder then asks for more).
    expect(stock.coveredUntil).toBe(until(M1));
  });
});

describe("standing permits at the key's object", () => {
  const POLICY = policyWith(60, 1_000);
  const NINE = T0 - (T0 % DAY_MS) + 9 * 3_600_000;
  let seq = 0;
  const newLimiter = () => env.QUOTA.getByName(`standing-rules-${++seq}`);
  const historyOf = (stub: DurableObjectStub<QuotaLimiter>) =>
    runInDurableObject(stub, (instance: QuotaLimiter) => instance.report(POLICY).days);
  const ask = (extra: object = {}) => ({ want: 0, returning: [], standing: 1, ...extra });

  it("cover the minutes of the current day only", () => {
    const midnight = NINE - 9 * 3_600_000 + DAY_MS;
    expect(standingMinutesFrom(midnight - 3 * MINUTE_MS + 5_000)).toEqual([
      midnight - 2 * MINUTE_MS,
      midnight - MINUTE_MS,
    ]);
  });

  it("cover the key's next requests at its gap there: 6 minutes at a gap of a minute or less, 30 at 5 minutes, never more", () => {
    expect([30_000, 60_000, 150_000, 300_000, 900_000].map(standingMinutesWanted)).toEqual([
      STANDING_MINUTES,
      STANDING_MINUTES,
      15,
      STANDING_MOST_MINUTES,
      STANDING_MOST_MINUTES,
    ]);
    expect(standingMinutesFrom(NINE + 5_000, 1_000)).toHaveLength(STANDING_MOST_MINUTES);
  });

  it("are granted for the minutes to come a holder asks for (6 when it does not say), within STANDING_MOST_MINUTES", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    const minutesOf = (a: Admission) => a.standing?.map((s) => s.minuteStart);
    const thirty = await stub.admit(POLICY, ask({ standingMinutes: 30 }), "k@AMS");
    expect(minutesOf(thirty)).toEqual(
      Array.from({ length: 30 }, (_, i) => NINE + (i + 1) * MINUTE_MS),
    );
    expect((await stub.admit(POLICY, ask(), "k@FRA")).standing).toHaveLength(STANDING_MINUTES);
    expect((await stub.usage(POLICY)).day.count, "2 requests, 36 permits").toBe(2 + 36);
  });

  it("a key's standing permits out, all locations together, stay within STANDING_MINUTES × heldBound: a later location gets what is left", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    const most = STANDING_MINUTES * 6; // a free key's heldBound: 6
    const granted: Admission[] = [];
    for (const l of ["AMS", "FRA", "LHR"])
      granted.push(await stub.admit(POLICY, ask({ standingMinutes: 30 }), `k@${l}`));
    const counts = granted.map((a) => a.standing?.length ?? 0);
    expect(counts).toEqual([STANDING_MOST_MINUTES, most - STANDING_MOST_MINUTES, 0]);
    // Handed back, they make room again.
    const returning = (granted[0]?.standing ?? []).map((s) => ({ id: s.id, unused: 1, used: 0 }));
    await stub.returnLeases({ returnId: crypto.randomUUID(), returning });
    const again = await stub.admit(POLICY, ask({ standingMinutes: 30 }), "k@LHR");
    expect(again.standing).toHaveLength(STANDING_MOST_MINUTES);
  });

  it("in each minute, all locations' standing permits stay within heldBound; the cap of STANDING_MINUTES × heldBound counts permits, not minutes", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    const fra = await stub.admit(POLICY, ask({ standing: 4 }), "k@FRA");
    expect(fra.standing).toHaveLength(STANDING_MINUTES);
    // 4 more in a minute holding 4 would pass heldBound (6): none.
    expect((await stub.admit(POLICY, ask({ standing: 4 }), "k@AMS")).standing).toBeUndefined();
    // 2 a minute for 30 minutes: 12 permits are left of 6 × 6, so 6 minutes.
    const lhr = await stub.admit(POLICY, ask({ standing: 2, standingMinutes: 30 }), "k@LHR");
    expect(lhr.standing?.map((s) => s.minuteStart)).toEqual(
      fra.standing?.map((s) => s.minuteStart),
    );
    expect((await stub.usage(POLICY)).day.count, "3 requests, 36 permits").toBe(3 + 36);
  });

  // The day counts standing permits at their grant and gets them back only at their hand-back, so
  // permits of minutes gone by that their holder has not handed back (a key calling there every
  // few minutes uses its permits with no call) still hold the day below the truth: they count
  // toward STANDING_MINUTES × heldBound as those of minutes to come do (docs/quotas.md, "The day
  // is not eaten", and X-RateLimit-Remaining "where the day binds").
  it("past their minute, count toward STANDING_MINUTES × heldBound until handed back: the day's permits counted unused stay within it", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const most = STANDING_MINUTES * 6; // a free key's heldBound: 6
    const first = await stub.admit(POLICY, ask({ standingMinutes: 30 }), "k@AMS");
    expect(first.standing).toHaveLength(STANDING_MOST_MINUTES);
    // 20 minutes on, AMS has made no call: its permits of those 20 minutes are still out.
    time.now = NINE + 20 * MINUTE_MS + 5_000;
    await stub.admit(POLICY, ask({ standingMinutes: 30 }), "k@FRA");
    // Less the 2 requests: what the day counts unused, at most heldBound in the current minute
    // (AMS's permit of it) and 6 × heldBound in the others (was 56: FRA got 26 more).
    const counted = (await stub.usage(POLICY)).day.count - 2;
    expect(counted, "permits counted in the day and not handed back").toBeLessThanOrEqual(most + 6);
  });

  it("are granted to a holder once per minute: asked again, only the minutes it does not hold yet", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const first = await stub.admit(POLICY, ask(), "k@AMS");
    expect(first.standing).toHaveLength(STANDING_MINUTES);
    time.now = NINE + 10_000;
    expect((await stub.admit(POLICY, ask(), "k@AMS")).standing).toBeUndefined();
    time.now = NINE + MINUTE_MS + 5_000;
    const next = await stub.admit(POLICY, ask(), "k@AMS");
    expect(next.standing?.map((s) => s.minuteStart)).toEqual([
      NINE + (STANDING_MINUTES + 1) * MINUTE_MS,
    ]);
    expect((await stub.usage(POLICY)).day.count, "3 requests, 7 permits").toBe(3 + 7);
  });

  it("a stock of the minute before, not handed back, is not waited for with them: stranded after its expiry as ever", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const stock = await stub.admit(POLICY, ask({ want: 2, standing: 0, minuteWant: 4 }), "k@AMS");
    expect(stock.lease?.expiresAt).toBe(NINE + MINUTE_MS); // lives its minute
    time.now = NINE + MINUTE_MS + 1_000;
    expect((await stub.admit(POLICY, ask(), "k@AMS")).standing).toHaveLength(STANDING_MINUTES);
    time.now = NINE + MINUTE_MS + STRANDED_AFTER_MS + 1;
    await stub.admit(POLICY);
    expect((await historyOf(stub))[0]).toMatchObject({
      admitted: 3,
      stranded: stock.lease!.permits,
    });
  });

  it("an answer repeated for its admission id gives again only the permits still out", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    const request = ask({ admissionId: newAdmissionId(NINE + 5_000) });
    const first = await stub.admit(POLICY, request, "k@AMS");
    const [handedBack, ...rest] = first.standing ?? [];
    await stub.returnLease({ id: handedBack!.id, unused: 1, used: 0 });
    const again = await stub.admit(POLICY, request, "k@AMS");
    expect(again.standing?.map((s) => s.id)).toEqual(rest.map((s) => s.id));
  });

  it("the lease granted with them is waited for as long as they are: what it served is billed admitted, not stranded", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const first = await stub.admit(POLICY, ask({ want: 2 }), "k@AMS");
    expect(first.lease).not.toBeNull();
    expect(first.standing).toHaveLength(STANDING_MINUTES);
    // Long past the lease's own expiry (its minute's end) and the stranding delay after it.
    time.now = NINE + 3 * MINUTE_MS;
    await stub.admit(POLICY);
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 2, stranded: 0 });
    await stub.returnLease({ id: first.lease!.id, unused: 1, used: 1 });
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 3, stranded: 0 });
  });
});

describe("a location holder's lease holder and its standing permits", () => {
  const POLICY = policyWith(LIMIT, 1_000);
  const allowed = (now: number, extra: Parameters<typeof allowedAt>[2] = {}) =>
    allowedAt(now, POLICY.version, extra);

  it("permits granted in an answer that arrives after the key changed here go back unused", async () => {
    const time = fixClock(T0 + 1_000);
    const { gate, open } = closedGate();
    let asked = 0;
    const calls: LeaseCalls = {
      admit: async () => {
        asked++;
        if (asked > 1) return allowed(time.now);
        await gate;
        // This minute's standing permit, granted before the change reached the holder.
        return allowed(time.now, { standing: [{ id: "st", permits: 1, minuteStart: T0 }] });
      },
      giveBack: async () => undefined,
    };
    const holder = new LeaseHolder({ stock: 2 });
    const first = holder.admit(POLICY, calls);
    await Promise.resolve();
    holder.dropLeaseAndRefusals(); // the key's object pushed a change
    open();
    expect((await first).decision.outcome).toBe("allowed");
    time.now += 1_000;
    const next = await holder.admit(POLICY, calls);
    expect(next.local, "not admitted from the permit granted before the change").toBe(false);
    expect(asked).toBe(2);
  });

  it("a lease a renewal brings in place of one granted with standing permits goes back at its expiry: only a lease granted with them waits for them", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: string[] = [];
    const calls: LeaseCalls = {
      admit: async () =>
        allowed(time.now, {
          lease: { id: "stock", permits: 2, expiresAt: time.now + STOCK_LEASE_MS },
          standing: [1, 2, 3, 4].map((m) => ({
            id: `st${m}`,
            permits: 1,
            minuteStart: T0 + m * MINUTE_MS,
          })),
        }),
      giveBack: async (returned) => {
        givenBack.push(returned.id);
      },
      renew: async () =>
        renewedAt(
          time.now,
          POLICY.version,
          { id: "next", permits: 2, expiresAt: time.now + STOCK_LEASE_MS },
          atContact(T0, 50),
        ),
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    time.now += 500;
    const second = await holder.admit(POLICY, calls);
    expect(second.local).toBe(true);
    expect(await second.renewal, "the renewal brought a new lease").toBe(true);
    await holder.giveBackAtExpiry(calls, async (ms) => {
      time.now += ms;
    });
    expect(time.now).toBeLessThan(T0 + 2 * MINUTE_MS); // the standing permits still last
    expect(givenBack).toContain("next");
  });

  it("asks for more once those it holds end by the key's next request at its gap, even at that very instant", async () => {
    const time = fixClock(T0 + 1_000);
    const renewals: RenewalRequest[] = [];
    const lastMinute = T0 + 4 * MINUTE_MS;
    const calls: LeaseCalls = {
      // The minute's stock, and one standing permit in each of the next four minutes.
      admit: async () =>
        allowed(time.now, {
          lease: { id: "stock", permits: 5, expiresAt: T0 + MINUTE_MS },
          standing: [1, 2, 3, 4].map((m) => ({
            id: `st${m}`,
            permits: 1,
            minuteStart: T0 + m * MINUTE_MS,
          })),
        }),
      giveBack: async () => undefined,
      renew: async (request): Promise<Renewal> => {
        renewals.push(request);
        return {
          policyVersion: POLICY.version,
          revoked: false,
          windows: atContact(time.now - (time.now % MINUTE_MS), 50),
          granted: null,
          now: time.now,
        };
      },
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    // The next request at a gap that, repeated, reaches the end of the last permit's minute.
    const coveredUntil = lastMinute + MINUTE_MS;
    const first = time.now;
    time.now = (coveredUntil + first) / 2;
    expect(time.now + (time.now - first)).toBe(coveredUntil);
    const second = await holder.admit(POLICY, calls);
    expect(second.local, "admitted from its minute's standing permit").toBe(true);
    await second.renewal;
    expect(renewals.filter((r) => (r.standing ?? 0) > 0)).toHaveLength(1);
  });

  it("asking for standing permits when the key's next request is due after the minute, it hands the minute's stock back in the same call", async () => {
    const time = fixClock(T0 + 1_000);
    const renewals: RenewalRequest[] = [];
    const calls: LeaseCalls = {
      admit: async () =>
        allowed(time.now, { lease: { id: "stock", permits: 5, expiresAt: T0 + MINUTE_MS } }),
      giveBack: async () => undefined,
      renew: async (request): Promise<Renewal> => {
        renewals.push(request);
        return {
          policyVersion: POLICY.version,
          revoked: false,
          windows: atContact(T0, 50),
          granted: null,
          now: time.now,
        };
      },
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    time.now = T0 + 40_000; // 39 s on: the next request is due after this minute
    const second = await holder.admit(POLICY, calls);
    expect(second.local).toBe(true);
    await second.renewal;
    const ask = renewals.find((r) => (r.standing ?? 0) > 0);
    expect(ask, "standing permits asked for").toBeDefined();
    expect(ask?.returning.map((r) => r.id)).toContain("stock");
  });
});
