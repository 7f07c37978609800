// A location holder's lease holder (src/quota/lease-holder.ts, held-lease.ts) at its edges, with
// the key's object played by fake calls: a lease's expiry instant, a renewal refused while the
// key changed here, a stock renewed while it still holds more than it keeps, and no standing
// permits asked for while it calls once per request.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { STOCK_LEASE_MS, STOCK_RENEW_AHEAD_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type {
  Admission,
  Lease,
  LeaseRequest,
  Renewal,
  RenewalRequest,
} from "../src/quota/lease-messages";
import type { WindowStatus } from "../src/quota/windows";
import { closedGate, fixClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);

const windowsAt = (now: number): WindowStatus[] => [
  {
    name: "minute",
    limit: 60,
    remaining: 50,
    resetAt: now - (now % MINUTE_MS) + MINUTE_MS,
    seconds: 60,
  },
  { name: "day", limit: 1_000, remaining: 900, resetAt: T0 + 86_400_000, seconds: 86_400 },
];

const allowed = (now: number, lease: Lease | null = null): Admission => ({
  outcome: "allowed",
  windows: windowsAt(now),
  now,
  policyVersion: POLICY.version,
  lease,
});

/** A renewal the key's object refused (near the limit, say): no lease granted. */
const refusedRenewal = (now: number): Renewal => ({
  policyVersion: POLICY.version,
  revoked: false,
  windows: windowsAt(now),
  granted: null,
  now,
});

describe("a location holder's lease holder", () => {
  it("admits from its stock until the instant the lease ends, not at it", async () => {
    const time = fixClock(T0 + 1_000);
    let asked = 0;
    const calls: LeaseCalls = {
      admit: async () => {
        asked++;
        const lease = asked === 1 ? { id: "stock", permits: 5, expiresAt: T0 + 5_000 } : null;
        return allowed(time.now, lease);
      },
      giveBack: async () => undefined,
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    time.now = T0 + 5_000 - 1;
    expect((await holder.admit(POLICY, calls)).local).toBe(true);
    time.now = T0 + 5_000;
    expect((await holder.admit(POLICY, calls)).local).toBe(false);
    expect(asked).toBe(2);
  });

  it("a renewal refused while the key changed here (a refusal forgotten) does not stop it asking for a lease", async () => {
    const time = fixClock(T0 + 1_000);
    const { gate, open } = closedGate();
    const admissions: LeaseRequest[] = [];
    const calls: LeaseCalls = {
      admit: async (request) => {
        admissions.push(request);
        const lease =
          admissions.length === 1 ? { id: "stock", permits: 2, expiresAt: T0 + 5_000 } : null;
        return allowed(time.now, lease);
      },
      giveBack: async () => undefined,
      renew: async (): Promise<Renewal> => {
        await gate;
        return refusedRenewal(time.now);
      },
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    time.now += 100;
    const renewing = await holder.admit(POLICY, calls);
    expect(renewing.renewal, "half the stock used: a renewal is sent").not.toBeNull();
    holder.forgetRefusals(); // a plan change or an unban made here while it was on its way
    open();
    await renewing.renewal;
    time.now += 100;
    expect((await holder.admit(POLICY, calls)).local).toBe(true); // the stock's last permit
    time.now += 100;
    await holder.admit(POLICY, calls);
    expect(admissions).toHaveLength(2);
    expect(admissions[1]?.want, "asks for a lease again").toBeGreaterThan(0);
  });

  it("renews a stock that still holds more than it keeps as it ends (asking for one permit), so its expiry moves on", async () => {
    const time = fixClock(T0 + 1_000);
    const renewals: RenewalRequest[] = [];
    const calls: LeaseCalls = {
      admit: async () => allowed(time.now, { id: "stock", permits: 5, expiresAt: T0 + 5_000 }),
      giveBack: async () => undefined,
      renew: async (request): Promise<Renewal> => {
        renewals.push(request);
        return {
          policyVersion: POLICY.version,
          revoked: false,
          windows: windowsAt(time.now),
          granted: { id: "stock", permits: request.want, expiresAt: time.now + STOCK_LEASE_MS },
          now: time.now,
        };
      },
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    time.now = T0 + 5_000 - STOCK_RENEW_AHEAD_MS; // 4 left, more than the stock of 2
    const ending = await holder.admit(POLICY, calls);
    expect(ending.local).toBe(true);
    await ending.renewal;
    expect(renewals.map((r) => r.want)).toEqual([1]);
    time.now = T0 + 5_000;
    expect((await holder.admit(POLICY, calls)).local, "the renewed stock lives on").toBe(true);
  });

  it("does not ask for standing permits while it calls once per request (near the limit, until the minute ends)", async () => {
    const time = fixClock(T0 + 1_000);
    let renewed = 0;
    const calls: LeaseCalls = {
      // Too near the limit for a stock: no lease, and this minute's standing permit from before.
      admit: async () => ({
        ...allowed(time.now),
        standing: [{ id: "standing", permits: 1, minuteStart: T0 }],
      }),
      giveBack: async () => undefined,
      renew: async (): Promise<Renewal> => {
        renewed++;
        return refusedRenewal(time.now);
      },
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(false);
    time.now = T0 + 35_000; // a sparse key: 34 s on
    const fromStanding = await holder.admit(POLICY, calls);
    expect(fromStanding.local).toBe(true);
    await fromStanding.renewal;
    expect(renewed).toBe(0);
  });
});
