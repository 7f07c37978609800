// A location holder's lease holder (src/quota/lease-holder.ts, held-lease.ts) at two edges, with
// the key's object played by fake calls: a lease's expiry instant, and a renewal refused while
// the key changed here.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Admission, Lease, LeaseRequest, Renewal } from "../src/quota/lease-messages";
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
        // Refused (near the limit, say): no lease granted.
        return {
          policyVersion: POLICY.version,
          revoked: false,
          windows: windowsAt(time.now),
          granted: null,
          now: time.now,
        };
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
});
