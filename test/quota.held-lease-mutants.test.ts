// Rules of what a holder holds of a key (src/quota/held-lease.ts) that no other test told apart
// from a small change to them (docs/mutation-testing.md, "By hand"), with the key's object played
// by fake calls as in quota.lease-holder-edges.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { STOCK_LEASE_MS, STOCK_RENEW_AHEAD_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Renewal, RenewalRequest } from "../src/quota/lease-messages";
import { allowedAt, atContact } from "./contact-answers";
import { closedGate, fixClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);

describe("a renewal that brings a new lease in place of the one in use", () => {
  it("hands the old lease's unused permits back with the next call: none is forgotten", async () => {
    const time = fixClock(T0 + 1_000);
    const { gate, open } = closedGate();
    const renewals: RenewalRequest[] = [];
    const calls: LeaseCalls = {
      admit: async () =>
        allowedAt(time.now, POLICY.version, {
          lease: { id: "stock", permits: 5, expiresAt: T0 + 5_000 },
        }),
      giveBack: async () => undefined,
      renew: async (request): Promise<Renewal> => {
        renewals.push(request);
        if (renewals.length === 1) await gate;
        return {
          policyVersion: POLICY.version,
          revoked: false,
          windows: atContact(time.now - (time.now % MINUTE_MS), 40),
          granted: {
            id: `next-${renewals.length}`,
            permits: 3,
            expiresAt: time.now + STOCK_LEASE_MS,
          },
          now: time.now,
        };
      },
    };
    const holder = new LeaseHolder({ stock: 2 });
    expect((await holder.admit(POLICY, calls)).leaseGranted).toBe(true);
    time.now = T0 + 5_000 - STOCK_RENEW_AHEAD_MS;
    const ending = await holder.admit(POLICY, calls);
    expect(ending.local).toBe(true);
    expect(ending.renewal, "a renewal is sent").not.toBeNull();
    const before = holder.unusedPermits;
    open();
    expect(await ending.renewal).toBe(true);
    expect(holder.unusedPermits, "the old lease's rest waits to go back").toBe(before + 3);
  });
});
