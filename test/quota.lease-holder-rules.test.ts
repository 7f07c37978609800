// The lease holder's rules at their edges (src/quota/lease-holder.ts), each on a real QuotaLimiter
// under fake time: which call may overlap which, when a lease is asked for, when a refusal ends,
// and how unused permits are kept to go back.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { leaseWanted } from "../src/quota/arrival-rate";
import {
  GIVE_BACK_GRACE_MS,
  ISOLATE_LEASE_MS,
  MINUTE_TAIL_MS,
  RENEW_AHEAD_MAX_MS,
  STOCK_LEASE_MS,
  STOCK_RENEW_AHEAD_MS,
} from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { HolderDecision } from "../src/quota/lease-in-hand";
import type {
  Admission,
  Lease,
  LeaseRequest,
  Renewal,
  RenewalRequest,
  ReturnedLease,
} from "../src/quota/lease-messages";
import type { Policy } from "../src/quota/windows";
import { admitUntilRenewal, closedGate, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);
let seq = 0;

const newObject = () => env.QUOTA.getByName(`lease_holder_rules_${++seq}`);
type Stub = ReturnType<typeof newObject>;

/** Lets every call already started reach the object and every answer already given settle. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * Calls to `stub` whose admissions wait at a gate until `open()`, recording each request and how
 * many calls were in flight when it was sent.
 */
function gatedAdmissions(stub: Stub, policy: Policy) {
  const { gate, open } = closedGate();
  let active = 0;
  const sent: { request: LeaseRequest; alongside: number }[] = [];
  const calls: LeaseCalls = {
    admit: async (request) => {
      sent.push({ request, alongside: active });
      active++;
      try {
        await gate;
        return await stub.admit(policy, request);
      } finally {
        active--;
      }
    },
    giveBack: (returned) => stub.returnLease(returned),
  };
  return { calls, open, sent, active: () => active };
}

/** Direct calls to `stub`, recording what each admission asked for. */
function recordedCalls(stub: Stub, policy: Policy) {
  const requests: LeaseRequest[] = [];
  const calls: LeaseCalls = {
    admit: (request) => {
      requests.push(request);
      return stub.admit(policy, request);
    },
    giveBack: (returned) => stub.returnLease(returned),
  };
  return { calls, requests };
}

/** Admits requests 10 ms apart until the holder holds unused leased permits. */
async function holdLease(holder: LeaseHolder, policy: Policy, calls: LeaseCalls) {
  for (let i = 0; i < 50 && holder.unusedPermits === 0; i++) {
    await holder.admit(policy, calls);
    time.now += 10;
  }
  expect(holder.unusedPermits).toBeGreaterThan(0);
}

describe("which calls overlap", () => {
  it("a quiet key's calls are decided one by one, side by side: a slow one holds no other up", async () => {
    const policy = policyWith(60, 1_000);
    const { calls, open, sent, active } = gatedAdmissions(newObject(), policy);
    const holder = new LeaseHolder();
    const first = holder.admit(policy, calls);
    await settle();
    time.now += 2_000; // one request every 2 s: a quiet key
    const second = holder.admit(policy, calls);
    await settle();
    expect(active(), "both calls in flight at once").toBe(2);
    expect(sent.map((s) => s.request)).toEqual([
      { want: 0, returning: [] },
      { want: 0, returning: [] },
    ]);
    open();
    const decided = await Promise.all([first, second]);
    expect(decided.map((d) => d.decision.outcome)).toEqual(["allowed", "allowed"]);
  });

  it("a key turning busy while a call is in flight waits for it, then asks for a lease alone", async () => {
    const policy = policyWith(6_000, 100_000);
    const { calls, open, sent } = gatedAdmissions(newObject(), policy);
    const holder = new LeaseHolder();
    const first = holder.admit(policy, calls); // quiet so far: decided one by one
    await settle();
    time.now += 2_000;
    const burst = Array.from({ length: 20 }, () => holder.admit(policy, calls));
    await settle();
    const leaseCalls = () => sent.filter((s) => s.request.want > 0);
    expect(leaseCalls(), "no lease asked for alongside the call in flight").toEqual([]);
    open();
    const decided = await Promise.all([first, ...burst]);
    expect(decided.every((d) => d.decision.outcome === "allowed")).toBe(true);
    expect(leaseCalls().length).toBeGreaterThan(0);
    expect(leaseCalls().every((s) => s.alongside === 0)).toBe(true);
  });
});

describe("refusals", () => {
  it("asks for no lease while refused, and asks again from the instant the refusal ends", async () => {
    const policy = policyWith(20, 1_000);
    const { calls, requests } = recordedCalls(newObject(), policy);
    const holder = new LeaseHolder();
    let refusedAt = -1;
    for (let i = 0; i < 60 && refusedAt < 0; i++) {
      if ((await holder.admit(policy, calls)).decision.outcome !== "allowed")
        refusedAt = requests.length;
      time.now += 10;
    }
    expect(refusedAt).toBeGreaterThan(0);
    const refusal = holder.refusal(time.now);
    expect(refusal).toMatchObject({ outcome: "rate_limited" });
    const { retryAt } = refusal!;
    // Busy up to the end of the refusal (fewer refusals than a ban takes).
    for (let i = 0; i < 4; i++) await holder.admit(policy, calls);
    time.now = retryAt - 900;
    for (let i = 0; i < 9; i++) {
      await holder.admit(policy, calls);
      time.now += 100;
    }
    expect(time.now).toBe(retryAt);
    const whileRefused = requests.slice(refusedAt);
    expect(whileRefused.length).toBeGreaterThanOrEqual(13);
    expect(whileRefused.map((r) => r.want).filter((w) => w !== 0)).toEqual([]);
    expect(holder.refusal(retryAt - 1)).toMatchObject({ outcome: "rate_limited" });
    expect(holder.refusal(retryAt), "over at retryAt").toBeNull();
    expect(holder.refusal(retryAt + 1)).toBeNull();
    const next = await holder.admit(policy, calls);
    expect(next.decision.outcome).toBe("allowed");
    expect(requests.at(-1)!.want, "a busy key asks for a lease again").toBeGreaterThan(0);
  });
});

describe("the work an admission leaves behind", () => {
  it("a request admitted from the lease leaves none: no lease was granted to it", async () => {
    const policy = policyWith(600, 10_000);
    const { calls } = recordedCalls(newObject(), policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    const decided = await holder.admit(policy, calls);
    expect(decided).toMatchObject({ local: true, leaseGranted: false, renewal: null });
    expect(holder.upkeep(decided, calls)).toBeNull();
  });

  // A lease dropped by a change made in this isolate (dropLease) goes back with the next call;
  // when no request of the key follows, its hand-back at expiry takes it back instead, with what
  // it served. Before, that timer did nothing, and the object settled the lease as stranded 30 s
  // on: requests served from it were billed as `stranded`, not `admitted`.
  it("a lease dropped while its hand-back at expiry waits goes back then, with what it served, counted once", async () => {
    const stub = newObject();
    const policy = policyWith(600, 10_000);
    const sent: ReturnedLease[] = [];
    const calls: LeaseCalls = {
      ...recordedCalls(stub, policy).calls,
      giveBack: (returned) => {
        sent.push({ ...returned });
        return stub.returnLease(returned);
      },
    };
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    for (let i = 0; i < 2; i++)
      expect((await holder.admit(policy, calls)).local, "served from the lease").toBe(true);
    const unused = holder.unusedPermits;
    const counted = (await stub.usage()).minute.count;
    const { gate, open } = closedGate();
    const atExpiry = holder.giveBackAtExpiry(calls, async (ms) => {
      await gate;
      time.now += ms;
    });
    holder.dropLease(); // a change to the key made in this isolate; no request of the key follows
    open();
    await atExpiry;
    expect(sent).toEqual([{ id: expect.any(String), unused, used: 2 }]);
    expect(holder.unusedPermits).toBe(0);
    expect((await stub.usage()).minute.count).toBe(counted - unused);
    const [day] = await runInDurableObject(stub, (o: QuotaLimiter) => o.report().days);
    expect(day).toMatchObject({ stranded: 0 });
    const admitted = day!.admitted;
    // The hand-back names its lease: delivered again, it is credited and billed once.
    await stub.returnLease(sent[0]!);
    expect((await stub.usage()).minute.count).toBe(counted - unused);
    const [again] = await runInDurableObject(stub, (o: QuotaLimiter) => o.report().days);
    expect(again!.admitted).toBe(admitted);
  });

  it("the hand-back at expiry started after the lease was dropped hands it back at once", async () => {
    const stub = newObject();
    const policy = policyWith(600, 10_000);
    const { calls } = recordedCalls(stub, policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    holder.dropLease();
    const slept: number[] = [];
    await holder.giveBackAtExpiry(calls, async (ms) => {
      slept.push(ms);
    });
    expect(slept, "nothing to wait for").toEqual([]);
    expect(holder.unusedPermits).toBe(0);
  });

  it("a lease goes back when the timer wakes at the very instant it expires", async () => {
    const stub = newObject();
    const policy = policyWith(600, 10_000);
    const { calls } = recordedCalls(stub, policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    const counted = (await stub.usage()).minute.count;
    const unused = holder.unusedPermits;
    await holder.giveBackAtExpiry(calls, async (ms) => {
      time.now += ms - GIVE_BACK_GRACE_MS; // the expiry, not the grace after it
    });
    expect(holder.unusedPermits).toBe(0);
    expect((await stub.usage()).minute.count).toBe(counted - unused);
  });

  it("a timer that wakes before the expiry returns at once, not waiting for a renewal in flight", async () => {
    const stub = newObject();
    const policy = policyWith(6_000, 1_000_000);
    const { gate, open } = closedGate();
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(policy, request),
      giveBack: (returned) => stub.returnLease(returned),
      renew: async (request: RenewalRequest) => {
        await gate;
        return stub.renewLease(policy, request);
      },
    };
    const holder = new LeaseHolder();
    const { renewal } = await admitUntilRenewal(holder, policy, calls, time, {
      stepMs: 50,
      most: 200,
    });
    let returned = false;
    void holder
      .giveBackAtExpiry(calls, async () => {})
      .then(() => {
        returned = true;
      });
    await settle();
    expect(returned).toBe(true);
    open();
    await renewal;
  });
});

describe("permits kept to go back", () => {
  it("a renewal granted to a lease dropped meanwhile joins its entry: one hand-back with both", async () => {
    const stub = newObject();
    const policy = policyWith(6_000, 1_000_000);
    const { gate, open } = closedGate();
    let granted = 0;
    const sent: ReturnedLease[] = [];
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(policy, request),
      giveBack: (returned) => {
        sent.push({ ...returned });
        return stub.returnLease(returned);
      },
      renew: async (request: RenewalRequest) => {
        await gate;
        const answer = await stub.renewLease(policy, request);
        granted = answer.granted?.permits ?? 0;
        return answer;
      },
    };
    const holder = new LeaseHolder();
    const { renewal, admitted } = await admitUntilRenewal(holder, policy, calls, time, {
      stepMs: 50,
      most: 200,
    });
    holder.dropLease(); // a plan change made in this isolate while the renewal was out
    const leftAtDrop = holder.unusedPermits;
    open();
    expect(await renewal).toBe(false);
    expect(granted).toBeGreaterThan(0);
    expect(holder.unusedPermits).toBe(leftAtDrop + granted);
    await holder.giveBackRetired(calls);
    expect(sent, "one entry for the lease").toHaveLength(1);
    expect(sent[0]!.unused).toBe(leftAtDrop + granted);
    expect(holder.unusedPermits).toBe(0);
    expect((await stub.usage()).minute.count).toBe(admitted);
  });

  it("a stock's renewal asks for what tops it up to the stock, not more", async () => {
    const stock = 10;
    const policy = policyWith(6_000, 1_000_000);
    const stub = newObject();
    const renewals: RenewalRequest[] = [];
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(policy, request),
      giveBack: (returned) => stub.returnLease(returned),
      renew: (request) => {
        renewals.push(request);
        return stub.renewLease(policy, request);
      },
    };
    const holder = new LeaseHolder({ stock });
    for (let i = 0; i < 40; i++) {
      const d = await holder.admit(policy, calls);
      await d.renewal;
      time.now += 1_100; // a quiet key: the stock alone sizes the lease
    }
    expect(renewals.length).toBeGreaterThan(0);
    expect(renewals.some((r) => r.holding > 0)).toBe(true);
    for (const r of renewals) expect(r.want).toBe(Math.max(stock - r.holding, 1));
  });
});

/**
 * Calls to `stub` under `policy()` recording every admission's request, the leases granted and
 * every renewal (with the time it was sent); admissions asking for a lease wait at `gate` when one
 * is given.
 */
function watchedCalls(stub: Stub, policy: () => Policy, gate?: Promise<void>) {
  const requests: LeaseRequest[] = [];
  const leases: Lease[] = [];
  const renewals: { at: number; request: RenewalRequest }[] = [];
  const calls: LeaseCalls = {
    admit: async (request) => {
      requests.push(request);
      if (gate && request.want > 0) await gate;
      const admission = await stub.admit(policy(), request);
      if (admission.lease) leases.push(admission.lease);
      return admission;
    },
    giveBack: (returned) => stub.returnLease(returned),
    renew: (request) => {
      renewals.push({ at: time.now, request });
      return stub.renewLease(policy(), request);
    },
  };
  return { calls, requests, leases, renewals };
}

/** Uses up the key's minute on `stub` but `room` requests, as other isolates would. */
async function othersUseAllBut(stub: Stub, policy: Policy, room: number) {
  while ((await stub.usage()).minute.count < policy.perMinute - room) await stub.admit(policy);
}

describe("renewals", () => {
  /** A fresh isolate's holder, taking a lease of 4 at `at` + 100 ms (two requests 100 ms apart). */
  async function isolateWithLease(policy: Policy, at = T0 + 1_000) {
    const watched = watchedCalls(newObject(), () => policy);
    const holder = new LeaseHolder();
    time.now = at;
    await holder.admit(policy, watched.calls); // quiet so far: decided by the object
    time.now += 100;
    expect((await holder.admit(policy, watched.calls)).leaseGranted).toBe(true);
    const lease = watched.leases[0]!;
    expect(lease.permits).toBe(4);
    return { ...watched, holder, lease };
  }

  it("an isolate's lease is renewed by the last request before RENEW_AHEAD_MAX_MS ahead of its expiry, at the key's last gap, while under half used", async () => {
    const policy = policyWith(6_000, 1_000_000);
    // No renewal answered yet: due RENEW_AHEAD_MAX_MS before the expiry. A request at `at`, its
    // gap since the lease's request being `at - grantedAt`, renews if its successor at that gap
    // would come after that.
    const dueAt = (lease: Lease) => lease.expiresAt - RENEW_AHEAD_MAX_MS;
    const early = await isolateWithLease(policy);
    const grantedAt = time.now;
    const lastNotDue = grantedAt + Math.floor((dueAt(early.lease) - grantedAt - 1) / 2);
    time.now = lastNotDue;
    const notDue = await early.holder.admit(policy, early.calls);
    expect(notDue.local).toBe(true);
    expect(notDue.renewal, "its successor is still in time").toBeNull();
    const later = 10_000; // another isolate and key, the same times 10 s on
    const due = await isolateWithLease(policy, T0 + 1_000 + later);
    time.now = lastNotDue + later + 1;
    const sent = await due.holder.admit(policy, due.calls);
    expect(sent.local).toBe(true);
    expect(sent.renewal, "its successor would be late").not.toBeNull();
    await sent.renewal;
    expect(due.renewals.map((r) => r.at)).toEqual([lastNotDue + later + 1]);
  });

  /**
   * An isolate's holder with a lease, whose renewals take `roundTripMs` (the key's object answers
   * half of it after the call, and is heard from the rest later), recording when each renewal was
   * sent and the expiry it brought.
   */
  async function isolateRenewingIn(policy: Policy, roundTripMs: number) {
    const stub = newObject();
    const watched = watchedCalls(stub, () => policy);
    /** `expiresAt` by the object's clock; `heldUntil` by the holder's (counted from `at`). */
    const renewed: {
      at: number;
      expiresAt: number | null;
      heldUntil: number | null;
      request: RenewalRequest;
    }[] = [];
    const calls: LeaseCalls = {
      ...watched.calls,
      renew: async (request) => {
        const at = time.now;
        time.now += roundTripMs / 2;
        const answer = await stub.renewLease(policy, request);
        time.now += roundTripMs / 2;
        const expiresAt = answer.granted?.expiresAt ?? null;
        const heldUntil = expiresAt === null ? null : at + (expiresAt - answer.now);
        renewed.push({ at, expiresAt, heldUntil, request });
        return answer;
      },
    };
    const holder = new LeaseHolder();
    return { ...watched, calls, holder, renewed, stub };
  }

  /** Sends a request every `gapMs` from `from` to `until`, each renewal awaited as it is sent. */
  async function requestsEvery(
    holder: LeaseHolder,
    policy: Policy,
    calls: LeaseCalls,
    { from, until, gapMs }: { from: number; until: number; gapMs: number },
  ) {
    const decided: HolderDecision[] = [];
    for (let at = from; at < until; at += gapMs) {
      time.now = Math.max(time.now, at);
      const decision = await holder.admit(policy, calls);
      decided.push(decision);
      await decision.renewal;
    }
    return decided;
  }

  /** A busy key's isolate (no limit near), its renewals taking 100 ms, and its minute's end. */
  async function busyIsolateNearItsTurn() {
    const policy = policyWith(1_000_000, 100_000_000);
    return { policy, minuteEnd: T0 + MINUTE_MS, ...(await isolateRenewingIn(policy, 100)) };
  }

  /** That isolate, sent 27 requests a second from 6 s before its minute's end to just before the tail. */
  async function busyUpToItsMinuteTail() {
    const isolate = await busyIsolateNearItsTurn();
    const { holder, policy, calls, minuteEnd } = isolate;
    await requestsEvery(holder, policy, calls, {
      from: minuteEnd - 6_000,
      until: minuteEnd - MINUTE_TAIL_MS - 500,
      gapMs: 37,
    });
    return isolate;
  }

  it("a busy isolate renews ahead by twice what its renewals take: 200 ms before the expiry when they take 100 ms", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const { holder, calls, renewed } = await isolateRenewingIn(policy, 100);
    const gapMs = 20;
    await requestsEvery(holder, policy, calls, { from: T0 + 1_000, until: T0 + 9_000, gapMs });
    // The first few come once half used, while the lease grows to the key's rate; then by expiry.
    const steady = renewed.filter((r) => r.at >= T0 + 4_000);
    expect(steady.length).toBeGreaterThanOrEqual(3);
    const aheadOfExpiry = steady.slice(1).map((r, i) => steady[i]!.heldUntil! - r.at);
    // Sent by the last request before it is due (at the key's gap, 20 ms).
    for (const ms of aheadOfExpiry) expect(ms).toBeGreaterThanOrEqual(200);
    for (const ms of aheadOfExpiry) expect(ms).toBeLessThan(200 + 2 * gapMs);
  });

  it("an isolate's lease does not lapse for a key slowing to 2.2 requests a second: every request after the first lease is decided from it", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const { holder, calls, requests, renewed } = await isolateRenewingIn(policy, 100);
    const gapMs = 455;
    const decided = await requestsEvery(holder, policy, calls, {
      from: T0 + 1_000,
      until: T0 + 20_000,
      gapMs,
    });
    // The first two decided by the object (the second takes the lease), every other one here.
    expect(requests).toHaveLength(2);
    expect(decided.slice(2).every((d) => d.local)).toBe(true);
    // About one renewal per lease's life (a new expiry 1,750 ms on), not one per request.
    expect(renewed.length).toBeLessThanOrEqual(Math.ceil(decided.length / 3) + 1);
  });

  it("a busy isolate's lease that ends with its minute: the next minute's lease comes in one renewal carrying it back, no call for a lease", async () => {
    const policy = policyWith(1_000_000, 100_000_000);
    const { holder, calls, requests, renewed, stub } = await isolateRenewingIn(policy, 100);
    const minuteEnd = T0 + MINUTE_MS;
    const decided = await requestsEvery(holder, policy, calls, {
      from: minuteEnd - 6_000,
      until: minuteEnd + 4_000,
      gapMs: 37, // 27 requests a second
    });
    // The first two decided by the object (the second takes the lease), every other one here:
    // none at the minute's turn asks the object (through the location holder) for a lease.
    expect(requests).toHaveLength(2);
    expect(decided.slice(2).every((d) => d.local)).toBe(true);
    const turn = renewed.filter((r) => r.at >= minuteEnd - MINUTE_TAIL_MS && r.at < minuteEnd);
    expect(turn, "one call at the turn").toHaveLength(1);
    // Sent once the lease ended (a one-way trip before the object's minute did): a new lease, the
    // old one handed back with it, with what it served.
    expect(turn[0]?.request).toMatchObject({ leaseId: "", holding: 0 });
    expect(turn[0]?.request.returning).toHaveLength(1);
    // An isolate's asks are sized by its rate alone: none names a stock for the minute.
    expect(turn[0]?.request).not.toHaveProperty("minuteWant");
    expect(requests[1]).not.toHaveProperty("minuteWant");
    expect(turn[0]?.expiresAt).toBe(turn[0]!.at + 50 + ISOLATE_LEASE_MS);
    // Counted exactly: once all is handed back, the day holds every request admitted.
    await holder.giveBackUnused(calls);
    expect((await stub.usage()).day.count).toBe(decided.length);
  });

  it("an isolate's lease that ended with its minute, the key quiet since: no call at the turn, the next request decided by the object", async () => {
    const { policy, holder, calls, requests, renewed, minuteEnd } = await busyUpToItsMinuteTail();
    const before = { requests: requests.length, renewed: renewed.length };
    time.now = minuteEnd + 30_000;
    const quiet = await holder.admit(policy, calls);
    expect(quiet.local).toBe(false);
    expect(renewed, "no refill for a key that went quiet").toHaveLength(before.renewed);
    expect(requests).toHaveLength(before.requests + 1);
    expect(requests.at(-1)?.want).toBe(0);
  });

  it("an isolate's lease that ended before its minute's tail, the key busy again: its next lease is asked for in the request's own call, no refill", async () => {
    const { policy, holder, calls, requests, renewed, minuteEnd } = await busyIsolateNearItsTurn();
    await requestsEvery(holder, policy, calls, {
      from: minuteEnd - 50_000,
      until: minuteEnd - 46_000,
      gapMs: 37,
    });
    time.now = minuteEnd - 43_000; // the lease ran out meanwhile
    const before = { requests: requests.length, renewed: renewed.length };
    await requestsEvery(holder, policy, calls, {
      from: minuteEnd - 43_000,
      until: minuteEnd - 42_800,
      gapMs: 37,
    });
    expect(renewed.slice(before.renewed).filter((r) => r.request.leaseId === "")).toEqual([]);
    expect(requests.length).toBeGreaterThan(before.requests);
  });

  it("an isolate's lease that ends with its minute: the refill goes from the very instant it expires, once in that minute", async () => {
    const { policy, holder, calls, requests, renewed, minuteEnd } = await busyUpToItsMinuteTail();
    const expiresAt = renewed.at(-1)!.expiresAt!;
    expect(expiresAt).toBeGreaterThanOrEqual(minuteEnd - MINUTE_TAIL_MS);
    const before = { requests: requests.length, renewed: renewed.length };
    time.now = expiresAt;
    await (await holder.admit(policy, calls)).renewal;
    expect(requests, "no call for a lease").toHaveLength(before.requests);
    expect(renewed.slice(before.renewed).map((r) => r.request.leaseId)).toEqual([""]);
    // The key pauses past the new lease's life, then calls again: once the turn is taken, its
    // next lease is asked for in a request's own call.
    const second = renewed.at(-1)!.expiresAt!;
    await requestsEvery(holder, policy, calls, {
      from: second + 1_000,
      until: second + 1_300,
      gapMs: 37,
    });
    expect(renewed.slice(before.renewed + 1).filter((r) => r.request.leaseId === "")).toEqual([]);
  });

  it("an isolate's lease used up in its minute's tail, before it expires: the next lease is asked for in the request's own call, no refill", async () => {
    const { policy, holder, calls, requests, renewed, minuteEnd } = await busyIsolateNearItsTurn();
    time.now = minuteEnd - MINUTE_TAIL_MS + 100;
    await holder.admit(policy, calls);
    time.now += 100;
    expect((await holder.admit(policy, calls)).leaseGranted).toBe(true);
    let decided = await holder.admit(policy, calls);
    while (decided.local) {
      time.now += 10;
      decided = await holder.admit(policy, calls);
    }
    expect(time.now).toBeLessThan(minuteEnd - 500); // used up, not expired
    expect(requests).toHaveLength(3);
    expect(renewed).toEqual([]);
  });

  it("an isolate's lease ending at the very first instant of its minute's tail: the refill goes at its expiry, no call for a lease", async () => {
    const { policy, holder, calls, requests, renewed, minuteEnd } = await busyIsolateNearItsTurn();
    const tailStart = minuteEnd - MINUTE_TAIL_MS;
    // Busy, its renewals held back, so that its lease is the one its own call takes at exactly
    // ISOLATE_LEASE_MS before the tail.
    const { renew: _, ...withoutRenewals } = calls;
    await requestsEvery(holder, policy, withoutRenewals, {
      from: minuteEnd - 6_000,
      until: minuteEnd - 4_000,
      gapMs: 37,
    });
    const grantedAt = tailStart - ISOLATE_LEASE_MS;
    const decided = await requestsEvery(holder, policy, withoutRenewals, {
      from: grantedAt,
      until: tailStart,
      gapMs: 60,
    });
    // The lease taken by the first (expiring at the tail's start, by the object's clock) served
    // every other.
    expect(decided[0]?.leaseGranted).toBe(true);
    expect(decided.slice(1).every((d) => d.local)).toBe(true);
    const before = { requests: requests.length, renewed: renewed.length };
    time.now = tailStart;
    await (await holder.admit(policy, calls)).renewal;
    expect(requests, "no call for a lease").toHaveLength(before.requests);
    expect(renewed.slice(before.renewed).map((r) => r.request.leaseId)).toEqual([""]);
  });

  it("an isolate's lease that ended in its minute's tail, the key quiet then busy again: the lease taken after it is refilled at the turn", async () => {
    const { policy, holder, calls, requests, renewed, minuteEnd } = await busyIsolateNearItsTurn();
    const at = async (...times: number[]) => {
      const decided: HolderDecision[] = [];
      for (const t of times) {
        time.now = t;
        const decision = await holder.admit(policy, calls);
        decided.push(decision);
        await decision.renewal;
      }
      return decided;
    };
    // A short burst takes a lease ending in the tail; at its end the key is quiet: nothing to
    // refill, the lease goes back in a call of its own.
    const burst = await at(minuteEnd - 2_600, minuteEnd - 2_550, minuteEnd - 2_500);
    expect(burst.map((d) => d.leaseGranted)).toEqual([false, true, false]);
    const quiet = minuteEnd - 2_550 + ISOLATE_LEASE_MS;
    expect(quiet).toBeGreaterThanOrEqual(minuteEnd - MINUTE_TAIL_MS);
    await at(quiet);
    expect(renewed, "no refill for a quiet key").toEqual([]);
    // Busy again in the tail: a lease in the request's own call, ending with the minute.
    const again = await at(minuteEnd - 300, minuteEnd - 250, minuteEnd - 200);
    expect(again.some((d) => d.leaseGranted)).toBe(true);
    const before = requests.length;
    await at(minuteEnd);
    expect(requests, "no call for a lease").toHaveLength(before);
    expect(renewed.map((r) => r.request.leaseId)).toEqual([""]);
  });

  it("an isolate's lease is not renewed once the key went quiet: it runs out and goes back", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const { holder, calls, lease, renewals } = await isolateWithLease(policy);
    // Due (within RENEW_AHEAD_MS of the expiry), but one request in the last second and three
    // in the horizon: a quiet key wants nothing.
    time.now = lease.expiresAt - 250;
    const quiet = await holder.admit(policy, calls);
    expect(quiet.local).toBe(true);
    expect(quiet.renewal, "quiet: nothing wanted").toBeNull();
    expect(renewals).toEqual([]);
  });

  it("a location holder's stock is sized for STOCK_LEASE_MS and renewed STOCK_RENEW_AHEAD_MS before the expiry", async () => {
    const stock = 6;
    const policy = policyWith(6_000, 1_000_000);
    const { calls, leases, renewals } = watchedCalls(newObject(), () => policy);
    const holder = new LeaseHolder({ stock });
    time.now = T0 + 1_000;
    expect((await holder.admit(policy, calls)).leaseGranted).toBe(true); // the stock, at once
    const lease = leases[0]!;
    expect(lease.permits).toBe(stock);
    time.now = lease.expiresAt - STOCK_RENEW_AHEAD_MS - 1;
    expect((await holder.admit(policy, calls)).renewal, "not due yet").toBeNull();
    time.now += 1;
    const due = await holder.admit(policy, calls);
    expect(due.renewal, "due: STOCK_RENEW_AHEAD_MS before the expiry").not.toBeNull();
    await due.renewal;
    // Two requests in the last second: a stock's lifetime at that rate, more than tops it up.
    const arrivals = [T0 + 1_000, time.now - 1, time.now];
    expect(renewals.map((r) => r.request.want)).toEqual([
      leaseWanted(arrivals, time.now, STOCK_LEASE_MS),
    ]);
    expect(renewals[0]!.request.want).toBeGreaterThan(stock - renewals[0]!.request.holding);
  });

  it("a lease taken at the very instant a ban ends is renewed like any other", async () => {
    const policy = policyWith(20, 1_000_000);
    const { calls, leases } = watchedCalls(newObject(), () => policy);
    const holder = new LeaseHolder();
    let outcome = "";
    for (let i = 0; i < 200 && outcome !== "key_banned"; i++) {
      time.now += 10;
      outcome = (await holder.admit(policy, calls)).decision.outcome;
    }
    expect(outcome).toBe("key_banned");
    const { retryAt } = holder.refusal(time.now)!;
    time.now = retryAt - 1;
    expect((await holder.admit(policy, calls)).decision.outcome).toBe("key_banned");
    time.now = retryAt; // two requests in the last second: a busy key, asking for a lease
    expect((await holder.admit(policy, calls)).leaseGranted).toBe(true);
    expect(leases.at(-1)!.permits).toBe(2); // a tenth of the minute's limit
    const halfUsed = await holder.admit(policy, calls);
    expect(halfUsed.local).toBe(true);
    expect(halfUsed.renewal, "half used: due").not.toBeNull();
    await halfUsed.renewal;
  });

  it("a renewal that brings nothing: no other renewal, and no lease asked for, until the minute ends", async () => {
    const policy = policyWith(100, 1_000_000);
    const stub = newObject();
    const { calls, requests, renewals } = watchedCalls(stub, () => policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    await othersUseAllBut(stub, policy, 3);
    let renewal: Promise<boolean> | null = null;
    for (let i = 0; i < 20 && !renewal && holder.unusedPermits > 0; i++) {
      time.now += 10;
      renewal = (await holder.admit(policy, calls)).renewal;
    }
    expect(renewal).not.toBeNull();
    expect(await renewal).toBe(false);
    expect(holder.unusedPermits, "the lease still has permits").toBeGreaterThan(0);
    const asked = requests.length;
    for (let i = 0; i < 20; i++) {
      time.now += 10;
      await holder.admit(policy, calls);
    }
    expect(renewals, "one renewal only").toHaveLength(1);
    const after = requests.slice(asked);
    expect(after.length, "the lease was used up").toBeGreaterThan(0);
    expect(after.map((r) => r.want).filter((w) => w !== 0)).toEqual([]);
    time.now = T0 + 60_000; // the minute's end: two requests there, a busy key
    await holder.admit(policy, calls);
    time.now += 10;
    await holder.admit(policy, calls);
    expect(requests.at(-1)!.want, "a lease again from the minute's end").toBeGreaterThan(0);
  });
});

describe("what the object's answer leaves", () => {
  it("a lease call that grants no lease (near the limit): one call per request, no lease asked for, until the minute ends", async () => {
    const policy = policyWith(100, 1_000_000);
    const stub = newObject();
    const { calls, requests } = watchedCalls(stub, () => policy);
    await othersUseAllBut(stub, policy, 5);
    const holder = new LeaseHolder();
    await holder.admit(policy, calls); // quiet: decided by the object
    time.now += 10;
    const asked = await holder.admit(policy, calls);
    expect(requests.map((r) => r.want > 0)).toEqual([false, true]);
    expect(asked).toMatchObject({ leaseGranted: false, decision: { outcome: "allowed" } });
    time.now += 10;
    expect((await holder.admit(policy, calls)).decision.outcome).toBe("allowed");
    expect(requests.at(-1)!.want, "busy, but no lease asked for this minute").toBe(0);
    time.now = T0 + 60_000; // the minute's end: two requests there, a busy key
    await holder.admit(policy, calls);
    time.now += 10;
    await holder.admit(policy, calls);
    expect(requests.at(-1)!.want, "a lease again from the minute's end").toBeGreaterThan(0);
  });

  it("a refusal of a request decided by itself: no lease asked for until it ends, though the key turns busy", async () => {
    const policy = policyWith(20, 1_000_000);
    const stub = newObject();
    const { calls, requests } = watchedCalls(stub, () => policy);
    await othersUseAllBut(stub, policy, 0);
    const holder = new LeaseHolder();
    const refused = await holder.admit(policy, calls); // quiet: decided by the object
    expect(refused.decision.outcome).toBe("rate_limited");
    expect(requests.at(-1)!.want).toBe(0);
    time.now += 10;
    await holder.admit(policy, calls); // two in the last second: busy
    expect(requests.at(-1)!.want, "refused: no lease asked for").toBe(0);
  });

  it("a key disabled, then enabled again elsewhere: its refusals still hold leases off", async () => {
    const enabled = policyWith(20, 1_000_000);
    let policy: Policy = { ...enabled, version: 2, revoked: true }; // disabled
    const stub = newObject();
    const { calls, requests } = watchedCalls(stub, () => policy);
    const holder = new LeaseHolder();
    expect((await holder.admit(policy, calls)).decision.outcome).toBe("revoked");
    policy = { ...enabled, version: 3 }; // enabled again in another isolate: nothing reset here
    await othersUseAllBut(stub, policy, 0);
    time.now += 10;
    expect((await holder.admit(policy, calls)).decision.outcome).toBe("rate_limited");
    time.now += 10;
    await holder.admit(policy, calls);
    expect(requests.at(-1)!.want, "refused: no lease asked for").toBe(0);
    expect(holder.refusal(time.now)).toMatchObject({ outcome: "rate_limited" });
  });

  it("a lease granted while this isolate changed the key goes back unused; only a lease the holder keeps counts as granted", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const stub = newObject();
    const { gate, open } = closedGate();
    const { calls, requests, leases } = watchedCalls(stub, () => policy, gate);
    const holder = new LeaseHolder();
    const plain = await holder.admit(policy, calls); // quiet: decided by the object
    expect(plain).toMatchObject({ local: false, leaseGranted: false });
    time.now += 10;
    const asking = holder.admit(policy, calls); // busy: asks for a lease, held at the gate
    await settle();
    holder.dropLease(); // a plan change made here while the answer is on its way
    open();
    const answered = await asking;
    expect(leases, "the object granted one").toHaveLength(1);
    expect(answered).toMatchObject({ local: false, leaseGranted: false });
    expect(holder.unusedPermits, "kept to go back").toBe(leases[0]!.permits);
    time.now += 10;
    const next = await holder.admit(policy, calls);
    expect(next.local, "not admitted from it").toBe(false);
    expect(requests.at(-1)!.returning).toEqual([
      { id: leases[0]!.id, unused: leases[0]!.permits, used: 0 },
    ]);
  });

  it("a lease call that fails keeps the leases it was handing back, for the next call", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const { calls, requests } = watchedCalls(newObject(), () => policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    holder.dropLease();
    const unused = holder.unusedPermits;
    const failing: LeaseCalls = { ...calls, admit: () => Promise.reject(new Error("unreachable")) };
    time.now += 10;
    await expect(holder.admit(policy, failing)).rejects.toThrow("unreachable");
    expect(holder.unusedPermits).toBe(unused);
    time.now += 10;
    await holder.admit(policy, calls);
    expect(requests.at(-1)!.returning.map((r) => r.unused)).toEqual([unused]);
  });
});

describe("refills (a location holder's stock when a minute begins)", () => {
  const stock = 6;

  it("asks for the stock only for a holder with a stock, able to renew, with no call in flight and no usable lease", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const stub = newObject();
    const { calls, renewals } = watchedCalls(stub, () => policy);
    expect(new LeaseHolder().refill(policy, calls), "an isolate keeps no stock").toBeNull();
    const { renew: _, ...cannotRenew } = calls;
    expect(new LeaseHolder({ stock }).refill(policy, cannotRenew)).toBeNull();
    const gated = gatedAdmissions(stub, policy);
    const busy = new LeaseHolder({ stock });
    const inFlight = busy.admit(policy, { ...gated.calls, renew: calls.renew });
    await settle();
    expect(
      busy.refill(policy, { ...gated.calls, renew: calls.renew }),
      "a call in flight",
    ).toBeNull();
    gated.open();
    await inFlight;
    expect(busy.refill(policy, calls), "a usable lease").toBeNull();
    expect(renewals).toEqual([]);
    const holder = new LeaseHolder({ stock });
    const refill = holder.refill(policy, calls);
    expect(await refill, "it brought a lease (its hand-back goes at expiry)").toBe(true);
    expect(renewals.map((r) => r.request)).toEqual([
      // No request has come yet: no gap to expect the minute's requests by (minuteStockWanted).
      {
        leaseId: "",
        want: stock,
        holding: 0,
        minuteWant: 0,
        returning: [],
        renewalId: expect.any(String),
      },
    ]);
    expect((await holder.admit(policy, calls)).local).toBe(true);
  });

  it("a refill at a minute's start asks for the requests expected in the rest of that minute at the key's last gap", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const { calls, renewals } = watchedCalls(newObject(), () => policy);
    const holder = new LeaseHolder({ stock });
    time.now = T0 + 1_000;
    await holder.admit(policy, calls);
    time.now = T0 + 11_000; // a gap of 10 s
    await (await holder.admit(policy, calls)).renewal;
    renewals.length = 0;
    time.now = T0 + MINUTE_MS + 500;
    expect(await holder.refill(policy, calls)).toBe(true);
    // 59.5 s of the minute left at a 10 s gap: 6 requests (minuteStockWanted).
    expect(renewals.map((r) => r.request.minuteWant)).toEqual([6]);
  });

  it("a location holder's stock that ended with its minute is not refilled by a request: the request asks for the stock in its own call", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const { calls, requests, renewals } = watchedCalls(newObject(), () => policy);
    const holder = new LeaseHolder({ stock });
    time.now = T0 + MINUTE_MS - 1_000;
    expect((await holder.admit(policy, calls)).leaseGranted).toBe(true);
    time.now = T0 + MINUTE_MS + 100;
    const next = await holder.admit(policy, calls);
    expect(next.leaseGranted).toBe(true);
    expect(requests).toHaveLength(2);
    expect(renewals.filter((r) => r.request.leaseId === "")).toEqual([]);
  });

  it("a refill that brings nothing: none again before the minute ends, one from its first instant", async () => {
    const policy = policyWith(20, 1_000_000);
    const stub = newObject();
    const { calls, renewals } = watchedCalls(stub, () => policy);
    await othersUseAllBut(stub, policy, 0);
    const holder = new LeaseHolder({ stock });
    expect(await holder.refill(policy, calls)).toBe(false);
    time.now += 1_000;
    expect(holder.refill(policy, calls), "the minute is used up").toBeNull();
    time.now = T0 + 60_000;
    const next = holder.refill(policy, calls);
    expect(next, "a new minute").not.toBeNull();
    expect(await next).toBe(true);
    expect(renewals).toHaveLength(2);
  });

  it("a refill answered after a change made here goes back unused", async () => {
    const policy = policyWith(6_000, 1_000_000);
    const stub = newObject();
    const { gate, open } = closedGate();
    const granted: Lease[] = [];
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(policy, request),
      giveBack: (returned) => stub.returnLease(returned),
      renew: async (request) => {
        const answer = await stub.renewLease(policy, request);
        if (answer.granted) granted.push(answer.granted);
        await gate;
        return answer;
      },
    };
    const holder = new LeaseHolder({ stock });
    const refill = holder.refill(policy, calls);
    await settle();
    holder.forgetRefusals(); // an unban made here while the answer is on its way
    open();
    expect(await refill).toBe(false);
    expect(granted).toHaveLength(1);
    expect(holder.unusedPermits).toBe(granted[0]!.permits);
    expect((await holder.admit(policy, calls)).local, "not admitted from it").toBe(false);
    await holder.giveBackUnused(calls);
    expect((await stub.usage()).minute.count).toBe(1);
  });

  it("a refill answered under a newer policy brings nothing and holds nothing off: the next refill goes at once", async () => {
    const v1 = policyWith(6_000, 1_000_000);
    const stub = newObject();
    await stub.configure({ ...policyWith(3_000, 1_000_000), version: 2 }); // a change made elsewhere
    const { calls, renewals } = watchedCalls(stub, () => v1);
    const holder = new LeaseHolder({ stock });
    expect(await holder.refill(v1, calls)).toBe(false);
    const next = holder.refill(v1, calls);
    expect(next, "nothing held off").not.toBeNull();
    expect(await next).toBe(false);
    expect(renewals).toHaveLength(2);
  });
});

describe("a holder whose clock runs behind the key's object's", () => {
  /** Calls to `stub` made while the object's clock reads `aheadMs` later than the holder's. */
  function objectAhead(stub: Stub, policy: Policy, aheadMs: number): LeaseCalls {
    const ahead = async (call: () => Promise<unknown>): Promise<unknown> => {
      time.now += aheadMs;
      try {
        return await call();
      } finally {
        time.now -= aheadMs;
      }
    };
    return {
      admit: (request) => ahead(() => stub.admit(policy, request)) as Promise<Admission>,
      giveBack: async (returned) => void (await ahead(() => stub.returnLease(returned))),
      renew: (request) => ahead(() => stub.renewLease(policy, request)) as Promise<Renewal>,
    };
  }

  it("stops admitting from a lease when the lease ends by the object's clock, not its own", async () => {
    const stub = newObject();
    const policy = policyWith(20, 1_000);
    const behindMs = 2_000;
    const calls = objectAhead(stub, policy, behindMs);
    const holder = new LeaseHolder();
    // 59 s into the object's minute: a lease granted now ends with that minute, at T0 + 60 s.
    time.now = T0 + 59_000 - behindMs;
    await holdLease(holder, policy, calls);
    // The object's clock has passed the lease's end (and the minute's); the holder's has not.
    time.now = T0 + 60_100 - behindMs;
    const decided = await holder.admit(policy, calls);
    expect(decided.local, "admitted from a lease that had ended").toBe(false);
    const minute = decided.decision.windows.find((w) => w.name === "minute")!;
    expect(minute.resetAt, "decided in the object's new minute").toBe(T0 + 2 * MINUTE_MS);
  });
});
