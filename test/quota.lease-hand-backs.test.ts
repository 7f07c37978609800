// When a holder hands permits back (src/quota/lease-hand-backs.ts), with fake calls to the key's
// object and fake time: a lease at its expiry (a stock for the minute with its minute), and the
// standing permits at their end.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { GIVE_BACK_GRACE_MS, STOCK_LEASE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type {
  Admission,
  Renewal,
  RenewalRequest,
  ReturnedLease,
} from "../src/quota/lease-messages";
import { allowedAt, atContact, CONTACT_LIMIT as LIMIT } from "./contact-answers";
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
      ...callsAnswering(
        () =>
          allowed(time.now, {
            lease: { id: "stock", permits: 10, expiresAt: time.now + STOCK_LEASE_MS },
          }),
        givenBack,
      ),
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
      ...callsAnswering(
        () =>
          allowed(time.now, {
            lease: { id: "stock", permits: 10, expiresAt: time.now + STOCK_LEASE_MS },
          }),
        givenBack,
      ),
      renew: async (): Promise<Renewal> => ({
        policyVersion: POLICY.version + 1,
        revoked: false,
        windows: atContact(T0, 40),
        granted: { id: "more", permits: 4, expiresAt: time.now + STOCK_LEASE_MS },
        now: time.now,
      }),
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
