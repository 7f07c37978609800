// Admission leases end to end on one real QuotaLimiter: simulated isolates, each with its own
// LeaseHolder (src/quota/lease-holder.ts), racing on one key's object under fake time.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { clock, MINUTE_MS } from "../src/lib/clock";
import type { AdmitResult } from "../src/objects/quota-holder-client";
import { QuotaLimiterClient } from "../src/objects/quota-limiter-client";
import { GIVE_BACK_GRACE_MS, heldBound, ISOLATE_LEASE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { RenewalRequest, ReturnedLease } from "../src/quota/lease-messages";
import type { KeyDecision, Policy } from "../src/quota/windows";
import {
  admitUntilRenewal,
  closedGate,
  MIDNIGHT,
  mockClock,
  policyWith,
  seededRandom as random,
  T0,
} from "./helpers";

const time = mockClock(T0);
let seq = 0;

const newObject = () => env.QUOTA.getByName(`lease_holders_${++seq}`);
type Stub = ReturnType<typeof newObject>;

/**
 * One simulated isolate: its own LeaseHolder calling the shared object, counting its calls
 * (renewals apart). With `renewing`, it renews its lease ahead as the Worker does.
 */
function isolate(stub: Stub, policy: () => Policy, { renewing = false } = {}) {
  const holder = new LeaseHolder();
  let calls = 0;
  let renewals = 0;
  const leaseCalls: LeaseCalls = {
    admit: (request) => {
      calls++;
      return stub.admit(policy(), request);
    },
    giveBack: (returned) => {
      calls++;
      return stub.returnLease(returned);
    },
    ...(renewing
      ? {
          renew: (request: RenewalRequest) => {
            renewals++;
            return stub.renewLease(policy(), request);
          },
        }
      : {}),
  };
  return {
    holder,
    leaseCalls,
    admit: () => holder.admit(policy(), leaseCalls),
    giveBack: () => holder.giveBackUnused(leaseCalls),
    calls: () => calls,
    renewals: () => renewals,
  };
}

/** Sends requests at the current instant until the isolate holds unused leased permits. */
async function holdLease(iso: ReturnType<typeof isolate>): Promise<void> {
  for (let i = 0; i < 50 && iso.holder.unusedPermits === 0; i++) await iso.admit();
  expect(iso.holder.unusedPermits).toBeGreaterThan(0);
}

const allowed = (ds: { decision: KeyDecision }[]) =>
  ds.filter((d) => d.decision.outcome === "allowed").length;
const remainingOf = (d: KeyDecision) => d.windows.map((w) => w.remaining);

describe("lease holders racing on one object (slow: simulated isolates make thousands of calls to a real object across three minutes)", () => {
  it.each([
    ["asking anew when a lease is over", false],
    ["renewing ahead", true],
  ])(
    "5 isolates over 23:58–00:01 UTC never over-admit, under-admit at most 5 leases, and account exactly (%s)",
    {
      timeout: 60_000,
    },
    async (_, renewing) => {
      const perMinute = 600;
      const perDay = 1000;
      const maxLease = perMinute / 10; // permitsToLease: at most a tenth of the per-minute limit
      const policy = policyWith(perMinute, perDay);
      const stub = newObject();
      const isolates = Array.from({ length: 5 }, () => isolate(stub, () => policy, { renewing }));
      const next = random(11);
      const STEP_MS = 250;
      let admittedToday = 0;
      let requests = 0;
      let local = 0;

      // Minutes 23:58 (the minute binds), 23:59 (the day binds: 400 left) and 00:00 (a new day).
      for (const [minute, minuteStart] of [
        MIDNIGHT - 2 * MINUTE_MS,
        MIDNIGHT - MINUTE_MS,
        MIDNIGHT,
      ].entries()) {
        if (minuteStart === MIDNIGHT) admittedToday = 0;
        const room = Math.min(perMinute, perDay - admittedToday);
        let admitted = 0;
        let refused = 0;
        for (let t = 0; t < MINUTE_MS; t += STEP_MS) {
          time.now = minuteStart + t;
          // Each isolate gets 0–2 simultaneous requests per step: ~720 a minute in all, racing.
          const burst = isolates.flatMap((iso) =>
            Array.from({ length: [0, 0, 0, 1, 2][Math.floor(next() * 5)]! }, () => iso.admit()),
          );
          const results = await Promise.all(burst);
          requests += results.length;
          local += results.filter((r) => r.local).length;
          admitted += allowed(results);
          refused += results.length - allowed(results);
          expect(admitted, `minute ${minute} at +${t} ms`).toBeLessThanOrEqual(perMinute);
          expect(admittedToday + admitted, `day at minute ${minute}`).toBeLessThanOrEqual(perDay);
        }
        admittedToday += admitted;
        expect(refused, `minute ${minute}: demand exceeded the room`).toBeGreaterThan(0);
        // Bounded under-admission: at most one outstanding lease per isolate went unused.
        expect(admitted, `minute ${minute}`).toBeGreaterThanOrEqual(
          room - isolates.length * maxLease,
        );
        expect(admitted).toBeLessThanOrEqual(room);
        const unused = isolates.reduce((n, iso) => n + iso.holder.unusedPermits, 0);
        expect(unused).toBeLessThanOrEqual(isolates.length * maxLease);
        expect(admitted + unused, `minute ${minute}: room locked up`).toBeGreaterThanOrEqual(
          room - isolates.length * maxLease,
        );
        // 23:59's leases cross midnight unreturned: handing them back must not touch the new day.
        if (minute === 1) continue;
        await Promise.all(isolates.map((iso) => iso.giveBack()));
        const usage = await stub.usage();
        expect(usage.minute.count, `minute ${minute}: object count = admitted`).toBe(admitted);
        expect(usage.day.count, `minute ${minute}: day count = admitted today`).toBe(admittedToday);
      }
      // Leases did their job: most requests were decided without a call.
      expect(local).toBeGreaterThan(requests / 4);
      const calls = isolates.reduce((n, iso) => n + iso.calls() + iso.renewals(), 0);
      expect(calls).toBeLessThan(requests);
      expect(isolates.some((iso) => iso.renewals() > 0)).toBe(renewing);
    },
  );

  it("a busy isolate whose calls overlap takes a lease: ≤ 10 calls per 1,000 requests", async () => {
    // 10 connections, each sending its next request when the last is answered; every call to
    // the object takes a (real) while, so requests decided one by one overlap. A busy key must
    // not stay in one call per request just because some call is always in flight.
    const stub = newObject();
    let calls = 0;
    const slow: LeaseCalls = {
      admit: async (request) => {
        calls++;
        await new Promise((r) => setTimeout(r, 5));
        return stub.admit(policyWith(1_000_000, 100_000_000), request);
      },
      giveBack: async (returned) => {
        calls++;
        await new Promise((r) => setTimeout(r, 5));
        return stub.returnLease(returned);
      },
    };
    const holder = new LeaseHolder();
    let local = 0;
    const connection = async () => {
      for (let i = 0; i < 100; i++) {
        const d = await holder.admit(policyWith(1_000_000, 100_000_000), slow);
        expect(d.decision.outcome).toBe("allowed");
        if (d.local) local++;
        time.now += 1; // 10 connections: ~100 requests a second in fake time
      }
    };
    await Promise.all(Array.from({ length: 10 }, connection));
    expect(local + calls).toBeGreaterThanOrEqual(1_000);
    expect(calls).toBeLessThanOrEqual(10);
  });

  it("one isolate with a lease in hand admits exactly min(N, R) of N simultaneous requests", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(200, 100_000));
    for (let i = 0; i < 30; i++) expect((await iso.admit()).decision.outcome).toBe("allowed");
    expect(iso.holder.unusedPermits).toBeGreaterThan(0); // it holds a lease now
    const results = await Promise.all(Array.from({ length: 250 }, () => iso.admit()));
    expect(allowed(results)).toBe(170);
    await iso.giveBack();
    expect((await stub.usage()).minute.count).toBe(200);
  });

  it("4 isolates whose demand fits the room are all admitted, every one", async () => {
    const stub = newObject();
    const isolates = Array.from({ length: 4 }, () => isolate(stub, () => policyWith(400, 100_000)));
    let admitted = 0;
    for (let t = 0; t < 20; t++) {
      time.now = T0 + t * 100;
      const results = await Promise.all(
        isolates.flatMap((iso) => Array.from({ length: 4 }, () => iso.admit())),
      );
      admitted += allowed(results);
    }
    expect(admitted).toBe(4 * 4 * 20);
  });
});

describe("one lease holder", () => {
  it("admits from its lease without calls, remaining going down by one per request", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(600, 10_000));
    const results = [];
    for (let i = 0; i < 40; i++) results.push(await iso.admit());
    expect(results.map((r) => remainingOf(r.decision)[0])).toEqual(
      Array.from({ length: 40 }, (_, i) => 599 - i),
    );
    expect(results.map((r) => remainingOf(r.decision)[1])).toEqual(
      Array.from({ length: 40 }, (_, i) => 9999 - i),
    );
    expect(results.filter((r) => r.local).length).toBeGreaterThan(20);
    expect(iso.calls()).toBe(40 - results.filter((r) => r.local).length);
  });

  it("never shows remaining going up when another isolate hands permits back", async () => {
    const stub = newObject();
    const a = isolate(stub, () => policyWith(600, 10_000));
    const b = isolate(stub, () => policyWith(600, 10_000));
    await holdLease(b);
    const before = remainingOf((await a.admit()).decision)[0]!;
    await b.giveBack(); // the object's remaining goes up
    const after = remainingOf((await a.admit()).decision)[0]!;
    expect(after).toBeLessThanOrEqual(before);
  });

  it("hands unused permits back at the latest GIVE_BACK_GRACE_MS after expiry", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(600, 10_000));
    await holdLease(iso);
    const counted = (await stub.usage()).minute.count;
    const unused = iso.holder.unusedPermits;
    const waits: number[] = [];
    await iso.holder.giveBackAtExpiry(iso.leaseCalls, async (ms) => {
      waits.push(ms);
      time.now += ms;
    });
    expect(waits).toHaveLength(1);
    // Within 2 s of the grant: an isolate's lease lives ISOLATE_LEASE_MS.
    expect(waits[0]).toBeLessThanOrEqual(2_000);
    expect(waits[0]).toBeLessThanOrEqual(ISOLATE_LEASE_MS + GIVE_BACK_GRACE_MS);
    expect(iso.holder.unusedPermits).toBe(0);
    expect((await stub.usage()).minute.count).toBe(counted - unused);
  });

  it("keeps a lease that has not expired yet when its timer wakes early", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(600, 10_000));
    await holdLease(iso);
    const unused = iso.holder.unusedPermits;
    await iso.holder.giveBackAtExpiry(iso.leaseCalls, async () => {});
    expect(iso.holder.unusedPermits).toBe(unused);
    expect((await iso.admit()).local).toBe(true);
  });

  it("a lease handed back twice is credited once", async () => {
    const stub = newObject();
    const first = await stub.admit(policyWith(600, 10_000), { want: 20, returning: [] });
    expect(first.lease?.permits).toBe(20);
    expect((await stub.usage()).minute.count).toBe(21);
    const returned = { id: first.lease!.id, unused: 20, used: 0 };
    await stub.returnLease(returned);
    await stub.returnLease(returned);
    await stub.admit(policyWith(600, 10_000), { want: 0, returning: [returned] });
    expect((await stub.usage()).minute.count).toBe(2);
  });

  it("a quiet key (one request every 2 s) never takes a lease: one call per request", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(60, 1000));
    for (let i = 0; i < 20; i++) {
      time.now = T0 + i * 2_000;
      expect((await iso.admit()).local).toBe(false);
      expect(iso.holder.unusedPermits).toBe(0);
    }
    expect(iso.calls()).toBe(20);
  });

  it("goes back to one call per request once refused, so the 429s and the ban stay exact", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(20, 1000));
    const outcomes = [];
    for (let i = 0; i < 60; i++) outcomes.push((await iso.admit()).decision.outcome);
    expect(outcomes.filter((o) => o === "allowed")).toHaveLength(20);
    // 20 refusals are tolerated (threshold max(10, 20)); the 21st and later ones are bans.
    expect(outcomes.slice(20, 40).every((o) => o === "rate_limited")).toBe(true);
    expect(outcomes.slice(40).every((o) => o === "key_banned")).toBe(true);
    const callsBefore = iso.calls();
    for (let i = 0; i < 5; i++) expect((await iso.admit()).local).toBe(false);
    expect(iso.calls()).toBe(callsBefore + 5);
    expect((await stub.usage()).minute.count).toBe(20);
  });

  it("stops using its lease once the isolate holds a newer policy than the lease's", async () => {
    const stub = newObject();
    let policy = policyWith(600, 10_000);
    const iso = isolate(stub, () => policy);
    await holdLease(iso);
    policy = policyWith(1000, 100_000, { version: 2 }); // this isolate re-read the key: a new plan
    const next = await iso.admit();
    expect(next.local).toBe(false);
    expect(next.decision.windows[0]!.limit).toBe(1000);
  });

  it("stops using its lease when the isolate made a plan change or revocation (dropLease)", async () => {
    const stub = newObject();
    let policy = policyWith(600, 10_000);
    const iso = isolate(stub, () => policy);
    await holdLease(iso);
    const admitted = (await stub.usage()).minute.count - iso.holder.unusedPermits;

    // Revoked in this isolate: the next request goes to the object and is refused.
    policy = policyWith(600, 10_000, { version: 2, revoked: true });
    await stub.configure(policy);
    iso.holder.dropLease();
    const calls = iso.calls();
    const next = await iso.admit();
    expect(next.local).toBe(false);
    expect(next.decision.outcome).toBe("revoked");
    expect(iso.calls()).toBe(calls + 1);
    // The dropped lease's unused permits went back with that call.
    expect((await stub.usage()).minute.count).toBe(admitted);
  });

  it("elsewhere, a revocation reaches a busy isolate's lease within 2 s: its lease expires by then", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(600, 10_000)); // another isolate: a stale policy
    // A burst: the isolate's lease then holds more than 2 s of requests at 10 a second, so only
    // the lease's lifetime can end it in time.
    for (let i = 0; i < 200 && iso.holder.unusedPermits < 20; i++) await iso.admit();
    expect(iso.holder.unusedPermits).toBeGreaterThanOrEqual(20);
    await stub.configure(policyWith(600, 10_000, { version: 2, revoked: true }));
    const revokedAt = time.now;
    let outcome = "allowed";
    while (outcome === "allowed") {
      time.now += 100;
      expect(time.now - revokedAt).toBeLessThan(2_000);
      outcome = (await iso.admit()).decision.outcome;
    }
    expect(outcome).toBe("revoked");
  });
});

/** Lease calls on `stub` whose renewals wait until the test calls `open()`. */
function gatedRenewals(stub: Stub, policy: Policy) {
  const { gate, open } = closedGate();
  let admitCalls = 0;
  let renewals = 0;
  const calls: LeaseCalls = {
    admit: (request) => {
      admitCalls++;
      return stub.admit(policy, request);
    },
    giveBack: (returned) => stub.returnLease(returned),
    renew: async (request) => {
      renewals++;
      await gate;
      return stub.renewLease(policy, request);
    },
  };
  return { calls, open, admitCalls: () => admitCalls, renewals: () => renewals };
}

describe("renewing a lease ahead", () => {
  it("the object extends the lease in use, counting its permits and admitting no request", async () => {
    const stub = newObject();
    const policy = policyWith(600, 10_000);
    const first = await stub.admit(policy, { want: 20, returning: [] });
    expect((await stub.usage()).minute.count).toBe(21);
    time.now += 2_000;
    const leaseId = first.lease!.id;
    const renewal = await stub.renewLease(policy, {
      leaseId,
      want: 30,
      holding: 8,
      returning: [],
    });
    expect(renewal.granted).toEqual({
      id: leaseId,
      permits: 30,
      expiresAt: time.now + ISOLATE_LEASE_MS,
    });
    expect(renewal.windows[0]!.remaining).toBe(600 - 21); // before the grant
    expect((await stub.usage()).minute.count).toBe(51);
    // The isolate never holds more than a tenth of the minute limit (60): holding 50, 10 more.
    const capped = await stub.renewLease(policy, {
      leaseId,
      want: 30,
      holding: 50,
      returning: [],
    });
    expect(capped.granted?.permits).toBe(10);
    // A give-back credits every unused permit of the lease, all grants together, once.
    await stub.returnLease({ id: leaseId, unused: 38 + 10, used: 12 });
    await stub.returnLease({ id: leaseId, unused: 38 + 10, used: 12 });
    expect((await stub.usage()).minute.count).toBe(61 - 48);
  });

  // A renewal granted by the object whose answer never reached its holder (renewals are not
  // retried) leaves permits counted that the holder does not know it has: its next renewal's
  // `holding` leaves them out. The object counts them by the lease's permits less what was
  // reported used, so what is counted and not served stays within heldBound.
  it("a renewal whose answer was lost: the next one is granted within heldBound of what was served", async () => {
    const stub = newObject();
    const policy = policyWith(60, 10_000); // heldBound 6
    const first = await stub.admit(policy, { want: 6, returning: [] });
    const leaseId = first.lease!.id;
    const granted0 = first.lease!.permits;
    // Used 4 of it, holding the rest: a renewal is granted, and its answer lost.
    const lost = await stub.renewLease(policy, {
      leaseId,
      want: 6,
      holding: granted0 - 4,
      used: 4,
      returning: [],
    });
    expect(lost.granted?.permits).toBeGreaterThan(0);
    // The holder goes on from what it knew: one more used, the lost grant not in its holding.
    const next = await stub.renewLease(policy, {
      leaseId,
      want: 6,
      holding: granted0 - 5,
      used: 5,
      returning: [],
    });
    const counted = (await stub.usage()).minute.count;
    const served = 1 + 5;
    expect(counted - served, "counted and not served").toBeLessThanOrEqual(heldBound(policy));
    // What the lease holds unused by the object's count (its grants less the 5 used) is the room.
    const unused = granted0 + lost.granted!.permits - 5;
    expect(next.granted?.permits ?? 0).toBe(Math.max(0, heldBound(policy) - unused));
  });

  it("a renewal that reports no `used` (a holder of the release before) is sized by the `holding` it reports, not by the lease's permits", async () => {
    const stub = newObject();
    const policy = policyWith(60, 10_000); // heldBound 6
    const first = await stub.admit(policy, { want: 6, returning: [] });
    expect(first.lease?.permits).toBe(heldBound(policy));
    // Used all but one of it: the object reads only what the holder says it holds.
    const renewal = await stub.renewLease(policy, {
      leaseId: first.lease!.id,
      want: 6,
      holding: 1,
      returning: [],
    });
    expect(renewal.granted?.permits).toBe(heldBound(policy) - 1);
  });

  it("grants a new lease in a new minute, and nothing to a revoked key", async () => {
    const stub = newObject();
    const policy = policyWith(600, 10_000);
    const first = await stub.admit(policy, { want: 20, returning: [] });
    time.now += MINUTE_MS;
    const leaseId = first.lease!.id;
    const next = await stub.renewLease(policy, { leaseId, want: 10, holding: 0, returning: [] });
    expect(next.granted?.id).not.toBe(leaseId);
    expect(next.granted?.permits).toBe(10);
    const revoked = policyWith(600, 10_000, { version: 2, revoked: true });
    const refused = await stub.renewLease(revoked, {
      leaseId,
      want: 10,
      holding: 0,
      returning: [],
    });
    expect(refused).toMatchObject({ revoked: true, granted: null, policyVersion: 2 });
    expect((await stub.usage(revoked)).minute.count).toBe(10);
  });

  it("grants nothing to a banned key, even in a new minute with room to spare", async () => {
    const stub = newObject();
    const policy = policyWith(20, 1_000);
    const first = await stub.admit(policy, { want: 2, returning: [] });
    expect(first.lease?.permits).toBe(2);
    let outcome = first.outcome as string;
    for (let i = 0; i < 100 && outcome !== "key_banned"; i++)
      outcome = (await stub.admit(policy)).outcome;
    expect(outcome).toBe("key_banned");
    time.now += MINUTE_MS; // a new minute: 20 of room, and the ban (15 minutes) still on
    const before = await stub.usage();
    expect(before.bannedUntil).toBeGreaterThan(time.now);
    expect(before.minute.count).toBe(0);
    const renewal = await stub.renewLease(policy, {
      leaseId: first.lease!.id,
      want: 2,
      holding: 0,
      returning: [],
    });
    expect(renewal).toMatchObject({ granted: null, revoked: false, policyVersion: 1 });
    const after = await stub.usage();
    expect(after.minute.count).toBe(0);
    expect(after.day.count).toBe(before.day.count);
  });

  it("while a renewal is on its way, requests are admitted from the lease with no call and no wait", async () => {
    const stub = newObject();
    const policy = policyWith(6_000, 1_000_000);
    const { calls, open, admitCalls, renewals } = gatedRenewals(stub, policy);
    const holder = new LeaseHolder();
    const shown: number[] = [];
    const admit = async () => {
      time.now += 50; // 20 requests a second
      const d = await holder.admit(policy, calls);
      expect(d.decision.outcome).toBe("allowed");
      shown.push(d.decision.windows[0]!.remaining);
      return d;
    };
    // Busy for a second first, its renewals answered at once: the lease is then sized from the
    // key's rate (its first one, from two requests, holds only a few permits).
    const answered: LeaseCalls = {
      admit: (request) => stub.admit(policy, request),
      giveBack: (returned) => stub.returnLease(returned),
      renew: (request) => stub.renewLease(policy, request),
    };
    for (let i = 0; i < 20; i++) {
      time.now += 50;
      const d = await holder.admit(policy, answered);
      expect(d.decision.outcome).toBe("allowed");
      await d.renewal;
    }
    let renewal: Promise<boolean> | null = null;
    for (let i = 0; i < 200 && !renewal; i++) renewal = (await admit()).renewal;
    expect(renewal).not.toBeNull();
    const callsBefore = admitCalls();
    const left = holder.unusedPermits;
    expect(left).toBeGreaterThan(3);
    for (let i = 0; i < 3; i++) expect((await admit()).local).toBe(true); // the gate is shut
    expect(admitCalls()).toBe(callsBefore);
    const countedBefore = (await stub.usage()).minute.count;
    open();
    expect(await renewal).toBe(true);
    const granted = (await stub.usage()).minute.count - countedBefore;
    expect(granted).toBeGreaterThan(0);
    expect(holder.unusedPermits).toBe(left - 3 + granted);
    for (let i = 0; i < 20; i++) expect((await admit()).local).toBe(true);
    expect(admitCalls()).toBe(callsBefore);
    expect(renewals()).toBeGreaterThanOrEqual(1);
    // One isolate's headers: down by exactly one per request, across the renewal.
    for (let i = 1; i < shown.length; i++) expect(shown[i]).toBe(shown[i - 1]! - 1);
  });

  it("when the lease runs out first, requests wait for the renewal and use it: no call each", async () => {
    const stub = newObject();
    const policy = policyWith(60, 1_000); // a free key: at most 6 permits unused in the isolate
    const { calls, open, admitCalls } = gatedRenewals(stub, policy);
    const holder = new LeaseHolder();
    const { admitted } = await admitUntilRenewal(holder, policy, calls, time, {
      stepMs: 100,
      most: 50,
    });
    const callsBefore = admitCalls();
    const left = holder.unusedPermits;
    // More requests at once than the lease has left: the rest wait for the renewal.
    const burst = Array.from({ length: left + 2 }, () => holder.admit(policy, calls));
    await new Promise((resolve) => setTimeout(resolve, 20));
    open();
    const results = await Promise.all(burst);
    expect(results.every((r) => r.decision.outcome === "allowed")).toBe(true);
    expect(results.every((r) => r.local)).toBe(true);
    expect(admitCalls()).toBe(callsBefore);
    // Every permit not used goes back: the object counts exactly what was admitted.
    await holder.giveBackUnused(calls);
    expect(holder.unusedPermits).toBe(0);
    expect((await stub.usage()).minute.count).toBe(admitted + results.length);
  });

  it("the object grants nothing to a caller on an older policy than its own", async () => {
    const stub = newObject();
    const first = await stub.admit(policyWith(600, 10_000), { want: 20, returning: [] });
    await stub.configure(policyWith(300, 10_000, { version: 2 }));
    const renewal = await stub.renewLease(policyWith(600, 10_000), {
      leaseId: first.lease!.id,
      want: 20,
      holding: 5,
      returning: [],
    });
    expect(renewal).toMatchObject({ granted: null, policyVersion: 2, revoked: false });
    expect((await stub.usage()).minute.count).toBe(21);
  });

  describe("an answer that finds things changed", () => {
    /** A busy holder on `stub` whose renewal has been sent and waits at the gate. */
    async function renewalOnItsWay(stub: Stub, policy: Policy) {
      const gated = gatedRenewals(stub, policy);
      const holder = new LeaseHolder();
      const { renewal, admitted } = await admitUntilRenewal(holder, policy, gated.calls, time, {
        stepMs: 50,
        most: 200,
      });
      return { ...gated, holder, renewal, admitted };
    }

    it("a plan change made elsewhere ends the lease when the renewal comes back", async () => {
      const stub = newObject();
      const v1 = policyWith(6_000, 1_000_000);
      const { holder, calls, open, renewal } = await renewalOnItsWay(stub, v1);
      await stub.configure(policyWith(3_000, 1_000_000, { version: 2 })); // another isolate
      open();
      expect(await renewal).toBe(false);
      // This isolate still has the old key record (v1), but no longer admits from the lease.
      const next = await holder.admit(v1, calls);
      expect(next.local).toBe(false);
      expect(next.decision.policyVersion).toBe(2);
      expect(next.decision.windows[0]!.limit).toBe(3_000);
    });

    it("a revocation made elsewhere ends the lease when the renewal comes back", async () => {
      const stub = newObject();
      const v1 = policyWith(6_000, 1_000_000);
      const { holder, calls, open, renewal } = await renewalOnItsWay(stub, v1);
      await stub.configure(policyWith(6_000, 1_000_000, { version: 2, revoked: true }));
      open();
      expect(await renewal).toBe(false);
      const next = await holder.admit(v1, calls);
      expect(next.local).toBe(false);
      expect(next.decision.outcome).toBe("revoked");
    });

    it("permits granted to a lease dropped meanwhile go back, and the count is exact", async () => {
      const stub = newObject();
      const policy = policyWith(6_000, 1_000_000);
      const { holder, calls, open, renewal, admitted } = await renewalOnItsWay(stub, policy);
      holder.dropLease(); // a plan change made in this isolate while the renewal was out
      open();
      expect(await renewal).toBe(false);
      expect(holder.unusedPermits).toBeGreaterThan(0);
      await holder.giveBackRetired(calls);
      expect(holder.unusedPermits).toBe(0);
      expect((await stub.usage()).minute.count).toBe(admitted);
    });

    describe("a renewal sent late in minute M and answered in minute M+1", () => {
      const policy = policyWith(100, 1_000_000);
      const M = T0 + 10 * MINUTE_MS;

      async function acrossTheMinute(stub: Stub, othersInNewMinute: number) {
        const gated = gatedRenewals(stub, policy);
        const holder = new LeaseHolder();
        time.now = M + 58_300;
        const { renewal } = await admitUntilRenewal(holder, policy, gated.calls, time, {
          stepMs: 50,
          most: 100,
        });
        time.now = M + MINUTE_MS + 10;
        for (let i = 0; i < othersInNewMinute; i++)
          expect((await stub.admit(policy, { want: 0, returning: [] })).outcome).toBe("allowed");
        const lastMinutesRest = holder.unusedPermits;
        gated.open();
        expect(await renewal).toBe(true); // a new lease in the new minute
        return { holder, calls: gated.calls, lastMinutesRest };
      }

      it("the object never refuses this isolate while it holds permits of the minute", async () => {
        const stub = newObject();
        const { holder, calls } = await acrossTheMinute(stub, 0);
        const inNewMinute = holder.unusedPermits;
        // Other isolates use the rest of the minute.
        for (let n = (await stub.usage()).minute.count; n < 100; n++)
          await stub.admit(policy, { want: 0, returning: [] });
        // The new lease expires unused; a request comes within the give-back grace.
        time.now += ISOLATE_LEASE_MS + 50;
        const d = await holder.admit(policy, calls);
        expect(inNewMinute).toBeGreaterThan(0);
        expect(d.decision.outcome).toBe("allowed"); // its own permits, handed back and reused
        await holder.giveBackUnused(calls);
        expect((await stub.usage()).minute.count).toBeLessThanOrEqual(100);
      });

      it("remaining shown is never above what the minute really has left", async () => {
        const stub = newObject();
        const { holder, calls, lastMinutesRest } = await acrossTheMinute(stub, 50);
        const d = await holder.admit(policy, calls);
        expect(d.local).toBe(true);
        const shown = d.decision.windows.find((w) => w.name === "minute")!.remaining;
        const usage = await stub.usage();
        // The object's room plus this isolate's permits of this minute (not last minute's rest).
        const truth = 100 - usage.minute.count + (holder.unusedPermits - lastMinutesRest);
        expect(shown).toBeLessThanOrEqual(truth);
      });
    });
  });
});

describe("the holder's own rules", () => {
  it("asks for a lease only while no other call for the key is in flight from the isolate", async () => {
    // The busy isolate of "calls overlap" above, watching every call it makes: a call that asks
    // for a lease (or hands one back) never overlaps another, in either order.
    const stub = newObject();
    const policy = policyWith(1_000_000, 100_000_000);
    let active = 0;
    let leaseCallActive = false;
    let leaseCalls = 0;
    const overlaps: string[] = [];
    const calls: LeaseCalls = {
      admit: async (request) => {
        const asksLease = request.want > 0 || request.returning.length > 0;
        if (asksLease ? active > 0 : leaseCallActive)
          overlaps.push(`${asksLease ? "lease" : "plain"} call with ${active} in flight`);
        active++;
        if (asksLease) {
          leaseCalls++;
          leaseCallActive = true;
        }
        try {
          await new Promise((r) => setTimeout(r, 5));
          return await stub.admit(policy, request);
        } finally {
          active--;
          if (asksLease) leaseCallActive = false;
        }
      },
      giveBack: (returned) => stub.returnLease(returned),
    };
    const holder = new LeaseHolder();
    const connection = async () => {
      for (let i = 0; i < 30; i++) {
        expect((await holder.admit(policy, calls)).decision.outcome).toBe("allowed");
        time.now += 1;
      }
    };
    await Promise.all(Array.from({ length: 10 }, connection));
    expect(leaseCalls).toBeGreaterThan(0);
    expect(overlaps).toEqual([]);
  });

  it("a renewal that never answers is given up after ISOLATE_LEASE_MS: the requests waiting for it ask the object", async () => {
    const realSetTimeout = globalThis.setTimeout;
    const realWait = (ms: number) => new Promise((resolve) => realSetTimeout(resolve, ms));
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const stub = newObject();
      const policy = policyWith(60, 1_000); // a free key: at most 6 permits unused in the isolate
      const { calls, admitCalls } = gatedRenewals(stub, policy); // the gate never opens
      const holder = new LeaseHolder();
      const { renewal } = await admitUntilRenewal(holder, policy, calls, time, {
        stepMs: 100,
        most: 50,
      });
      const given = renewal!.then(
        () => "answered",
        () => "given up",
      );
      const left = holder.unusedPermits;
      expect(left).toBeGreaterThan(0);
      // Two more requests than the lease has left: they wait for the renewal.
      let settled = 0;
      const burst = Array.from({ length: left + 2 }, () =>
        holder.admit(policy, calls).then((d) => {
          settled++;
          return d;
        }),
      );
      await vi.advanceTimersByTimeAsync(ISOLATE_LEASE_MS - 1);
      await realWait(20);
      expect(settled).toBe(left);
      const callsBefore = admitCalls();
      await vi.advanceTimersByTimeAsync(1);
      const results = await Promise.race([Promise.all(burst), realWait(2_000).then(() => null)]);
      expect(results, "requests still waiting for the renewal").not.toBeNull();
      expect(await given).toBe("given up");
      // The first of the two asks the object (for a lease: the key is busy); the other waits
      // for that call and admits from what it brought.
      expect(results!.slice(left).some((r) => !r.local)).toBe(true);
      expect(results!.every((r) => r.decision.outcome === "allowed")).toBe(true);
      expect(admitCalls()).toBeGreaterThan(callsBefore);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a renewal that fails keeps the permits it was handing back: they go back with a later call", async () => {
    const stub = newObject();
    const policy = policyWith(100, 1_000_000);
    const M = T0 + 10 * MINUTE_MS;
    let failRenewals = false;
    const { gate, open } = closedGate();
    const handedBack: ReturnedLease[] = [];
    let oldLease = "";
    const calls: LeaseCalls = {
      admit: async (request) => {
        const admission = await stub.admit(policy, request);
        if (admission.lease) oldLease = admission.lease.id;
        return admission;
      },
      giveBack: (returned) => {
        handedBack.push(returned);
        return stub.returnLease(returned);
      },
      renew: async (request) => {
        if (failRenewals) throw new Error("connection lost");
        await gate;
        return stub.renewLease(policy, request);
      },
    };
    const holder = new LeaseHolder();
    const admit = async () => {
      time.now += 50;
      return holder.admit(policy, calls);
    };
    // A renewal sent late in minute M and answered in M+1 brings a new lease: the old lease's
    // rest waits to go back, with the next call.
    time.now = M + 58_300;
    let renewal: Promise<boolean> | null = null;
    for (let i = 0; i < 100 && !renewal; i++) renewal = (await admit()).renewal;
    expect(renewal).not.toBeNull();
    time.now = M + MINUTE_MS + 10;
    const lastMinutesRest = holder.unusedPermits;
    expect(lastMinutesRest).toBeGreaterThan(0);
    open();
    expect(await renewal).toBe(true);
    // The next renewal carries that rest back, and fails.
    failRenewals = true;
    let failed: Promise<boolean> | null = null;
    let before = 0;
    for (let i = 0; i < 100 && !failed; i++) {
      before = holder.unusedPermits;
      failed = (await admit()).renewal;
    }
    expect(failed).not.toBeNull();
    await expect(failed).rejects.toThrow("connection lost");
    expect(holder.unusedPermits).toBe(before - 1); // only the request's own permit is gone
    await holder.giveBackUnused(calls);
    expect(holder.unusedPermits).toBe(0);
    // Both leases' rests went back: the new lease's, and the old one the failed renewal carried.
    expect(handedBack).toHaveLength(2);
    expect(handedBack).toContainEqual(
      expect.objectContaining({ id: oldLease, unused: lastMinutesRest }),
    );
  });

  it("a plan raised in this isolate while a renewal's answer was on its way: the next request takes a lease under it", async () => {
    const stub = newObject();
    const v1 = policyWith(100, 1_000_000);
    const v2 = policyWith(1_000, 1_000_000, { version: 2 });
    let policy = v1;
    const { gate, open } = closedGate();
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(policy, request),
      giveBack: (returned) => stub.returnLease(returned),
      // The object answers at once; the answer reaches the isolate when the gate opens.
      renew: async (request) => {
        const answer = await stub.renewLease(policy, request);
        await gate;
        return answer;
      },
    };
    const holder = new LeaseHolder();
    const admit = async () => {
      time.now += 50; // 20 requests a second
      return holder.admit(policy, calls);
    };
    for (let i = 0; i < 50 && holder.unusedPermits === 0; i++) await admit();
    expect(holder.unusedPermits).toBeGreaterThan(0);
    // Other isolates leave the minute 3 requests of room: the renewal brings no permits.
    while ((await stub.usage()).minute.count < 97) await stub.admit(v1);
    const counted = (await stub.usage()).minute.count;
    let renewal: Promise<boolean> | null = null;
    for (let i = 0; i < 20 && !renewal && holder.unusedPermits > 0; i++)
      renewal = (await admit()).renewal;
    expect(renewal).not.toBeNull();
    expect((await stub.usage()).minute.count).toBe(counted); // nothing granted
    // The plan is raised here (what QuotaLimiterClient.configureOrThrow does) before the answer.
    policy = v2;
    holder.dropLease();
    holder.forgetRefusals();
    await stub.configure(v2);
    open();
    expect(await renewal).toBe(false);
    const next = await admit();
    expect(next.decision.outcome).toBe("allowed");
    expect(next.leaseGranted).toBe(true);
    expect((await admit()).local).toBe(true);
  });
});

describe("QuotaLimiterClient's hand-backs", () => {
  it("a renewal that brings no lease to use hands the dropped lease's permits back at once", async () => {
    // Expiry timers never fire here: only the hand-back the renewal's answer starts can run.
    vi.spyOn(clock, "sleep").mockReturnValue(new Promise<void>(() => {}));
    const keyId = `client_handback_${++seq}`;
    const { gate, open } = closedGate();
    let renewals = 0;
    // The real namespace, with renewals held at the gate.
    const getByName = (name: string) => {
      const stub = env.QUOTA.getByName(name) as unknown as Record<
        string,
        (...a: unknown[]) => Promise<unknown>
      >;
      const get = (_t: object, p: string | symbol) =>
        p === "then" || typeof p !== "string"
          ? undefined
          : async (...args: unknown[]) => {
              if (p === "renewLease") {
                renewals++;
                await gate;
              }
              return stub[p]!(...args);
            };
      return new Proxy({}, { get });
    };
    const client = new QuotaLimiterClient({ getByName } as unknown as Env["QUOTA"], {
      id: keyId,
      region: null,
    });
    const v1 = policyWith(6_000, 1_000_000);
    let admitted = 0;
    let started: AdmitResult | null = null;
    for (let i = 0; i < 200 && renewals === 0; i++) {
      time.now += 50;
      const result = await client.admit(v1);
      if (result.reached && result.decision.outcome === "allowed") admitted++;
      if (renewals > 0) started = result;
    }
    expect(started?.reached && started.afterResponse).toBeTruthy();
    // A plan change made in this isolate while the renewal is on its way drops the lease.
    await client.configureOrThrow(policyWith(3_000, 1_000_000, { version: 2 }));
    const stub = env.QUOTA.getByName(keyId);
    expect((await stub.usage()).minute.count).toBeGreaterThan(admitted);
    open();
    await (started as Extract<AdmitResult, { reached: true }>).afterResponse;
    expect((await stub.usage()).minute.count).toBe(admitted);
  });
});

describe("the holder's memory of hand-backs and refusals", () => {
  it("a retired lease whose hand-back fails is kept, and goes back with the next hand-back", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(600, 10_000));
    await holdLease(iso);
    const held = iso.holder.unusedPermits;
    iso.holder.dropLease(); // retired: its unused permits wait to go back
    const sent: ReturnedLease[] = [];
    let reachable = false;
    const calls = {
      giveBack: (returned: ReturnedLease) => {
        sent.push({ ...returned });
        return reachable ? stub.returnLease(returned) : Promise.reject(new Error("unreachable"));
      },
    };
    await iso.holder.giveBackRetired(calls);
    expect(sent).toHaveLength(1);
    expect(iso.holder.unusedPermits, "kept for the next call").toBe(held);
    reachable = true;
    await iso.holder.giveBackRetired(calls);
    expect(sent).toHaveLength(2);
    expect(sent[1]).toEqual(sent[0]);
    expect(iso.holder.unusedPermits).toBe(0);
  });

  it("a renewal that did not renew leaves the retired leases' hand-back as its request's upkeep", async () => {
    const stub = newObject();
    const iso = isolate(stub, () => policyWith(600, 10_000));
    await holdLease(iso);
    const decided = await iso.admit();
    iso.holder.dropLease();
    const sent: ReturnedLease[] = [];
    const calls = { giveBack: (r: ReturnedLease) => (sent.push(r), stub.returnLease(r)) };
    const upkeep = iso.holder.upkeep({ ...decided, renewal: Promise.resolve(false) }, calls);
    expect(upkeep).not.toBeNull();
    await upkeep;
    expect(sent).toHaveLength(1);
    expect(iso.holder.unusedPermits).toBe(0);
  });

  it.each(["forgetRefusals", "dropLeaseAndRefusals"] as const)(
    "%s forgets the refusal seen here",
    async (forget) => {
      const iso = isolate(newObject(), () => policyWith(2, 100));
      for (let i = 0; i < 3; i++) await iso.admit();
      expect(iso.holder.refusal(time.now)).toMatchObject({ outcome: "rate_limited" });
      iso.holder[forget]();
      expect(iso.holder.refusal(time.now)).toBeNull();
    },
  );
});
