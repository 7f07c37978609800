// The lease holder's rules at their edges (src/quota/lease-holder.ts), each on a real QuotaLimiter
// under fake time: which call may overlap which, when a lease is asked for, when a refusal ends,
// and how unused permits are kept to go back.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { GIVE_BACK_GRACE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { LeaseRequest, RenewalRequest, ReturnedLease } from "../src/quota/lease-messages";
import type { Policy } from "../src/quota/windows";
import { admitUntilRenewal, closedGate, mockClock, T0 } from "./helpers";

const time = mockClock(T0);
let seq = 0;

const policyOf = (perMinute: number, perDay: number): Policy => ({
  perMinute,
  perDay,
  version: 1,
  revoked: false,
});
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
    const policy = policyOf(60, 1_000);
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
    const policy = policyOf(6_000, 100_000);
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
    const policy = policyOf(20, 1_000);
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
    const policy = policyOf(600, 10_000);
    const { calls } = recordedCalls(newObject(), policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    const decided = await holder.admit(policy, calls);
    expect(decided).toMatchObject({ local: true, leaseGranted: false, renewal: null });
    expect(holder.upkeep(decided, calls)).toBeNull();
  });

  it("the hand-back at expiry of a lease dropped meanwhile does nothing and does not fail", async () => {
    const stub = newObject();
    const policy = policyOf(600, 10_000);
    const { calls } = recordedCalls(stub, policy);
    const holder = new LeaseHolder();
    await holdLease(holder, policy, calls);
    holder.dropLease();
    const slept: number[] = [];
    const atExpiry = holder.giveBackAtExpiry(calls, async (ms) => {
      slept.push(ms);
    });
    await expect(atExpiry).resolves.toBeUndefined();
    expect(slept).toEqual([]);
  });

  it("a lease goes back when the timer wakes at the very instant it expires", async () => {
    const stub = newObject();
    const policy = policyOf(600, 10_000);
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
    const policy = policyOf(6_000, 1_000_000);
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
    const policy = policyOf(6_000, 1_000_000);
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
    const policy = policyOf(6_000, 1_000_000);
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
