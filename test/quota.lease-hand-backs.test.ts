// When a holder hands permits back (src/quota/lease-hand-backs.ts), with fake calls to the key's
// object and fake time: a lease at its expiry (a stock for the minute with its minute), and the
// standing permits at their end.
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { clock, MINUTE_MS } from "../src/lib/clock";
import { GIVE_BACK_GRACE_MS, STOCK_LEASE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type {
  Admission,
  Renewal,
  RenewalRequest,
  ReturnedLease,
} from "../src/quota/lease-messages";
import { allowedAt, atContact, CONTACT_LIMIT as LIMIT, renewedAt } from "./contact-answers";
import { admitUntilRenewal, closedGate, fixClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(LIMIT, 1_000);

const allowed = (now: number, extra: Parameters<typeof allowedAt>[2] = {}) =>
  allowedAt(now, POLICY.version, extra);

/** Calls whose hand-backs are recorded in `givenBack`; `admit` answers `answer()`. */
function callsAnswering(answer: () => Admission, givenBack: ReturnedLease[]): LeaseCalls {
  return {
    admit: async () => answer(),
    giveBack: async (returned) => {
      givenBack.push(returned);
    },
  };
}

/** Calls granting a stock of 10 for STOCK_LEASE_MS at every admit, hand-backs in `givenBack`. */
const stockCalls = (time: { now: number }, givenBack: ReturnedLease[]) =>
  callsAnswering(
    () =>
      allowed(time.now, {
        lease: { id: "stock", permits: 10, expiresAt: time.now + STOCK_LEASE_MS },
      }),
    givenBack,
  );

describe("a holder's stock for the minute", () => {
  it("its answer 100 ms on its way (so it ends 100 ms before the minute by the holder's clock), goes back GIVE_BACK_GRACE_MS after the minute's end: the refill at the turn would carry it", async () => {
    const time = fixClock(T0 + 30_000);
    const givenBack: ReturnedLease[] = [];
    const minuteEnd = T0 + MINUTE_MS;
    const calls = callsAnswering(
      () => allowed(time.now + 100, { lease: { id: "minute", permits: 5, expiresAt: minuteEnd } }),
      givenBack,
    );
    const holder = new LeaseHolder({ stock: 5 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    await holder.giveBackAtExpiry(calls, async (ms) => {
      time.now += ms;
    });
    expect(time.now).toBe(minuteEnd + GIVE_BACK_GRACE_MS);
    expect(givenBack.map((r) => r.id)).toEqual(["minute"]);
  });
});

describe("a lease at its expiry", () => {
  it("with a renewal in flight that extends it: kept once the renewal is answered, not handed back", async () => {
    const time = fixClock(T0 + 1_000);
    const { gate, open } = closedGate();
    const givenBack: ReturnedLease[] = [];
    const calls: LeaseCalls = {
      ...stockCalls(time, givenBack),
      // Answered as the object decided it when it arrived, the answer held on its way back.
      renew: async (request: RenewalRequest): Promise<Renewal> => {
        const at = time.now;
        await gate;
        return {
          policyVersion: POLICY.version,
          revoked: false,
          windows: atContact(T0, 40),
          granted: { id: request.leaseId, permits: 4, expiresAt: at + STOCK_LEASE_MS },
          now: at,
        };
      },
    };
    const holder = new LeaseHolder({ stock: 10 });
    const { renewal } = await admitUntilRenewal(holder, POLICY, calls, time, {
      stepMs: 200,
      most: 40,
    });
    // The timer wakes past the lease's expiry; the renewal's answer comes back after it.
    await holder.giveBackAtExpiry(calls, async (ms) => {
      time.now += ms;
      setTimeout(open, 10);
    });
    expect(await renewal, "extended").toBe(true);
    expect(givenBack).toEqual([]);
    expect(holder.unusedPermits).toBeGreaterThan(0);
    expect((await holder.admit(POLICY, calls)).local, "admitted from it").toBe(true);
  });
});

/** Standing permits, one each, for the minutes `minutes` after T0's. */
const standingFor = (...minutes: number[]): Admission["standing"] =>
  minutes.map((m) => ({ id: `st${m}`, permits: 1, minuteStart: T0 + m * MINUTE_MS }));

describe("standing permits at their end", () => {
  it("go back with the lease granted with them, expired by then", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: ReturnedLease[] = [];
    const calls = callsAnswering(
      () =>
        allowed(time.now, {
          lease: { id: "stock", permits: 2, expiresAt: time.now + STOCK_LEASE_MS },
          standing: standingFor(1, 2),
        }),
      givenBack,
    );
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    await holder.handBackStandingAtEnd(calls, async (ms) => {
      time.now += ms;
    });
    expect(time.now).toBe(T0 + 3 * MINUTE_MS + GIVE_BACK_GRACE_MS);
    expect(givenBack.map((r) => r.id).sort()).toEqual(["st1", "st2", "stock"]);
    expect(holder.unusedPermits).toBe(0);
  });

  it("are not handed back when later ones were granted meanwhile: those wait for their own end", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: ReturnedLease[] = [];
    let asked = 0;
    const calls = callsAnswering(
      () =>
        ++asked === 1
          ? allowed(time.now, {
              lease: { id: "stock", permits: 2, expiresAt: time.now + STOCK_LEASE_MS },
              standing: standingFor(1),
            })
          : allowed(time.now, { standing: standingFor(3, 4) }),
      givenBack,
    );
    const holder = new LeaseHolder({ stock: 2 });
    await holder.admit(POLICY, calls);
    expect(holder.standingUntil).toBe(T0 + 2 * MINUTE_MS);
    await holder.handBackStandingAtEnd(calls, async (ms) => {
      time.now += ms;
      // A request as the first ends: the key's object grants later ones with its answer.
      await holder.admit(POLICY, calls);
    });
    expect(asked).toBe(2);
    expect(holder.standingUntil).toBe(T0 + 5 * MINUTE_MS);
    expect(givenBack.map((r) => r.id)).not.toContain("st3");
    expect(givenBack.map((r) => r.id)).not.toContain("st4");
  });
});

describe("a hand-back in one call", () => {
  it("that fails keeps its permits, to go back with a later one", async () => {
    const time = fixClock(T0 + 1_000);
    const sent: string[][] = [];
    let fail = true;
    const calls: LeaseCalls = {
      admit: async () =>
        allowed(time.now, {
          lease: { id: "stock", permits: 3, expiresAt: time.now + STOCK_LEASE_MS },
        }),
      giveBack: async () => {
        throw new Error("use giveBackAll");
      },
      giveBackAll: async (returning) => {
        sent.push(returning.map((r) => r.id));
        if (fail) throw new Error("connection lost");
      },
    };
    const holder = new LeaseHolder({ stock: 3 });
    await holder.admit(POLICY, calls);
    const unused = holder.unusedPermits;
    expect(unused).toBeGreaterThan(0);
    await holder.giveBackUnused(calls);
    expect(holder.unusedPermits, "kept after the failed call").toBe(unused);
    fail = false;
    await holder.giveBackRetired(calls);
    expect(sent).toEqual([["stock"], ["stock"]]);
    expect(holder.unusedPermits).toBe(0);
  });
});

describe("a renewal whose answer ends the holder's leases", () => {
  it("(a newer policy) has the permits it granted handed back once it is answered", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: ReturnedLease[] = [];
    const calls: LeaseCalls = {
      ...stockCalls(time, givenBack),
      renew: async () =>
        renewedAt(
          time.now,
          POLICY.version + 1,
          { id: "more", permits: 4, expiresAt: time.now + STOCK_LEASE_MS },
          atContact(T0, 40),
        ),
    };
    const holder = new LeaseHolder({ stock: 10 });
    const { renewal } = await admitUntilRenewal(holder, POLICY, calls, time, {
      stepMs: 200,
      most: 40,
    });
    await holder.giveBackAfterRenewal(renewal, calls);
    expect(await renewal).toBe(false);
    expect(givenBack.map((r) => r.id)).toContain("more");
  });
});

/** The key's policy read again since POLICY (a push this holder missed). */
const NEWER = policyWith(LIMIT, 1_000, { version: POLICY.version + 1 });

describe("standing permits of an older policy", () => {
  it("are handed back once: a lease put aside later, while standing permits serve, waits for a call to the key's object", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: ReturnedLease[] = [];
    let asked = 0;
    const calls = callsAnswering(() => {
      const lease = { permits: 2, expiresAt: time.now + STOCK_LEASE_MS };
      return ++asked === 1
        ? allowed(time.now, { lease: { id: "old", ...lease }, standing: standingFor(1) })
        : allowedAt(time.now, NEWER.version, {
            lease: { id: "new", ...lease },
            standing: standingFor(0),
          });
    }, givenBack);
    const holder = new LeaseHolder({ stock: 2 });
    await holder.admit(POLICY, calls);
    // Under the newer policy: st1 superseded, it and "old" carried by the call that brings "new".
    expect((await holder.admit(NEWER, calls)).leaseGranted).toBe(true);
    time.now += 100;
    const fromLease = await holder.admit(NEWER, calls);
    expect(fromLease.local).toBe(true);
    expect(holder.upkeep(fromLease, calls), "nothing left to hand back").toBeNull();
    // "new" expires, granted with standing permits that last: put aside, no call of its own.
    await holder.giveBackAtExpiry(calls, async (ms) => {
      time.now += ms;
    });
    const fromStanding = await holder.admit(NEWER, calls);
    expect(fromStanding.local, "admitted from st0").toBe(true);
    expect(holder.upkeep(fromStanding, calls), "no hand-back call").toBeNull();
    expect(asked).toBe(2);
    expect(givenBack).toEqual([]);
  });

  it("superseded by a refill's answer that brings a lease, go back with no wait for that lease's expiry", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: ReturnedLease[] = [];
    const calls: LeaseCalls = {
      ...callsAnswering(
        () =>
          allowed(time.now, {
            lease: { id: "old", permits: 2, expiresAt: time.now + STOCK_LEASE_MS },
            standing: standingFor(1),
          }),
        givenBack,
      ),
      renew: async () =>
        renewedAt(
          time.now,
          NEWER.version,
          { id: "new", permits: 2, expiresAt: time.now + STOCK_LEASE_MS },
          atContact(T0, 40),
        ),
    };
    const { gate, open } = closedGate();
    const slept: number[] = [];
    const sleep = vi.spyOn(clock, "sleep").mockImplementation(async (ms) => {
      slept.push(ms);
      await gate;
      time.now += ms;
    });
    onTestFinished(() => sleep.mockRestore());
    const holder = new LeaseHolder({ stock: 2 });
    await holder.admit(POLICY, calls);
    time.now += 100;
    const refill = holder.refill(NEWER, calls);
    expect(refill, "a refill sent").not.toBeNull();
    const handedBack = holder.giveBackAfterRenewal(refill as Promise<boolean>, calls);
    expect(await refill, "brought a lease").toBe(true);
    // The hand-back at "new"'s expiry is asleep; st1 (superseded) is back meanwhile.
    await vi.waitFor(() => expect(slept).toHaveLength(1));
    await vi.waitFor(() => expect(givenBack.map((r) => r.id)).toEqual(["st1"]));
    open();
    await handedBack;
    expect(givenBack.map((r) => r.id)).toEqual(["st1", "new"]);
  });
});

describe("every unused permit handed back", () => {
  it("not while a request decided one by one is in flight: the lease stays held", async () => {
    const time = fixClock(T0 + 1_000);
    const givenBack: ReturnedLease[] = [];
    const { gate, open } = closedGate();
    let asked = 0;
    const calls: LeaseCalls = {
      admit: async () => {
        if (++asked === 1)
          return allowedAt(time.now, NEWER.version, {
            lease: { id: "stock", permits: 10, expiresAt: time.now + STOCK_LEASE_MS },
          });
        await gate;
        const stale: Admission = {
          outcome: "stale",
          windows: atContact(T0, 40),
          now: time.now,
          policyVersion: NEWER.version,
          lease: null,
        };
        return stale;
      },
      giveBack: async (returned) => {
        givenBack.push(returned);
      },
      // Renewed with nothing: no lease is asked for until the minute's end.
      renew: async () => renewedAt(time.now, NEWER.version, null, atContact(T0, 40)),
    };
    const holder = new LeaseHolder({ stock: 10 });
    const { renewal } = await admitUntilRenewal(holder, NEWER, calls, time, {
      stepMs: 200,
      most: 40,
    });
    expect(await renewal).toBe(false);
    const unused = holder.unusedPermits;
    expect(unused).toBeGreaterThan(0);
    // A request on an older copy of the key: no lease wanted, decided by a call of its own.
    const decided = holder.admit(POLICY, calls);
    await vi.waitFor(() => expect(asked).toBe(2));
    await holder.giveBackUnused(calls);
    expect(givenBack).toEqual([]);
    expect(holder.unusedPermits).toBe(unused);
    open();
    expect((await decided).decision.outcome).toBe("stale");
  });
});
