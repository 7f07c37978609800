// Two clocks that disagree: the key's object's stepping back (an NTP correction) after its windows
// moved on, and a location holder's running behind the object's. Driven against the key's real
// QuotaLimiter with fake time.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { DAY_MS } from "../src/lib/clock";
import { QuotaHolder } from "../src/objects/quota-holder";
import { QUIET_STOCK, STOCK_LEASE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Admission, Renewal } from "../src/quota/lease-messages";
import { fixClock, policyWith, T0 } from "./helpers";

const LIMIT = 60;
const POLICY = policyWith(LIMIT, 1_000);
/** A minute's start, 9:00 UTC: far from the day's end. */
const M = T0 - (T0 % DAY_MS) + 9 * 3_600_000;
let seq = 0;

describe("the key's object whose clock steps back after it moved into a minute", () => {
  const newLimiter = () => env.QUOTA.getByName(`clock_skew_${++seq}`);
  const askFor = { want: 0, returning: [], standing: 2, standingMinutes: 6 };
  const grants: [string, (stub: ReturnType<typeof newLimiter>) => Promise<Admission | Renewal>][] =
    [
      ["a forwarded request", (stub) => stub.admit(POLICY, askFor, "k@AMS")],
      [
        "a renewal",
        (stub) =>
          stub.renewLease(
            POLICY,
            { ...askFor, leaseId: "", holding: 0, renewalId: crypto.randomUUID() },
            "k@AMS",
          ),
      ],
    ];

  it.each(grants)(
    "grants %s standing permits only for minutes after the one its windows are in: the minute admits no more than its limit",
    async (_, grant) => {
      const time = fixClock(M + 200);
      const stub = newLimiter();
      expect((await stub.admit(POLICY)).outcome).toBe("allowed");
      // The clock steps back 1 s: below the minute the windows are in, which they stay in.
      time.now = M - 800;
      const answer = await grant(stub);
      const minutes = answer.standing?.map((s) => s.minuteStart) ?? [];
      expect(minutes.length, "some standing permits granted").toBeGreaterThan(0);
      const ofThisMinute = minutes.filter((m) => m <= M);
      expect.soft(ofThisMinute, "permits for the current minute").toEqual([]);
      // The object fills minute M; a location may use its permits of M on top.
      let admitted = "outcome" in answer ? 2 : 1; // the forwarded request counted in M too
      for (time.now = M + 1_000; (await stub.admit(POLICY)).outcome === "allowed"; ) admitted++;
      const permitsOfM = (answer.standing ?? []).filter((s) => s.minuteStart === M);
      const usable = permitsOfM.reduce((n, s) => n + s.permits, 0);
      expect(admitted + usable, "requests minute M can admit").toBeLessThanOrEqual(LIMIT);
    },
  );
});

describe("a location holder whose clock runs behind the key's object's", () => {
  const BEHIND_MS = 1_500;
  /** Near its limit (10 a minute): a stock lives STOCK_LEASE_MS, not to the minute's end. */
  const NEAR = policyWith(10, 1_000);

  it("stops admitting from its stock when the stock ends by the object's clock, when the object no longer tells it of a change", async () => {
    const time = fixClock(M + 10_000 - BEHIND_MS); // the holder's clock
    const stub = env.QUOTA.getByName(`clock_skew_${++seq}`);
    const byObjectClock = async <T>(call: () => Promise<T>): Promise<T> => {
      time.now += BEHIND_MS;
      try {
        return await call();
      } finally {
        time.now -= BEHIND_MS;
      }
    };
    const calls: LeaseCalls = {
      admit: (request) => byObjectClock<Admission>(() => stub.admit(NEAR, request, "k@AMS")),
      giveBack: (returned) => byObjectClock(async () => void (await stub.returnLease(returned))),
      renew: (request) => byObjectClock<Renewal>(() => stub.renewLease(NEAR, request, "k@AMS")),
    };
    const holder = new LeaseHolder({ stock: QUIET_STOCK });
    const first = await holder.admit(NEAR, calls);
    expect(first.leaseGranted, "a stock granted at M + 10 s by the object's clock").toBe(true);
    expect(holder.unusedPermits).toBeGreaterThan(0);
    // The key changes just after the stock's expiry by the object's clock: not told to this holder.
    const told = vi.spyOn(QuotaHolder.prototype, "keyChanged").mockResolvedValue(undefined);
    time.now = M + 10_000 + STOCK_LEASE_MS + 100 - BEHIND_MS;
    await byObjectClock(() => stub.configure({ ...NEAR, version: 2 }));
    expect(told, "a change pushed to the holder").not.toHaveBeenCalled();
    // Within BEHIND_MS after, by the object's clock: the holder's copy of the key is the old one.
    time.now = M + 10_000 + STOCK_LEASE_MS + 1_000 - BEHIND_MS;
    const later = await holder.admit(NEAR, calls);
    expect(later.local, "admitted from the stock under the old version").toBe(false);
    expect(later.decision.policyVersion, "decided under the key's version").toBe(2);
  });
});
