// A location holder whose clock runs ahead of the key's object's (by less than the 2 s the quota
// model allows) and a stock for the minute (a key far from its limits) that the key stops using
// before it is used up. The stock goes back, with what it served, before the key's object settles
// it as stranded (STRANDED_AFTER_MS after its expiry, its minute over): every request it served is
// billed admitted (docs/quotas.md, "Billing").
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { QUIET_STOCK } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Admission, Renewal } from "../src/quota/lease-messages";
import { fixClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
/** A minute's start, 9:00 UTC: far from the day's end. */
const M = T0 - (T0 % DAY_MS) + 9 * 3_600_000;
const AHEAD_MS = 1_000;

describe("a location holder whose clock runs ahead of the key's object's", () => {
  it("hands back a stock for the minute it stopped using before the key's object settles it as stranded: what it served is billed admitted", async () => {
    const time = fixClock(M + 10_000 + AHEAD_MS); // the holder's clock
    const stub = env.QUOTA.getByName(`clock_ahead_${crypto.randomUUID()}`);
    const handBacksAt: number[] = [];
    const byObjectClock = async <T>(call: () => Promise<T>): Promise<T> => {
      time.now -= AHEAD_MS;
      try {
        return await call();
      } finally {
        time.now += AHEAD_MS;
      }
    };
    const calls: LeaseCalls = {
      admit: (request) => byObjectClock<Admission>(() => stub.admit(POLICY, request, "k@AMS")),
      giveBack: (returned) =>
        byObjectClock(async () => {
          handBacksAt.push(time.now);
          await stub.returnLease(returned);
        }),
      renew: (request) => byObjectClock<Renewal>(() => stub.renewLease(POLICY, request, "k@AMS")),
    };
    const holder = new LeaseHolder({ stock: QUIET_STOCK });
    const first = await holder.admit(POLICY, calls);
    expect(first.leaseGranted, "a stock for the minute, granted with the first request").toBe(true);
    time.now = M + 20_000 + AHEAD_MS;
    const second = await holder.admit(POLICY, calls);
    expect(second.local, "the second served from the stock").toBe(true);
    // The key stops calling here. Its stock goes back at its expiry (no refill: not used since).
    // Meanwhile, 1 s after the object's deadline for it, a usage read reaches the key's object.
    const readAt = M + MINUTE_MS + STRANDED_AFTER_MS + 1_000; // the object's clock
    let read = false;
    const sleep = async (ms: number) => {
      const wake = time.now + ms;
      if (!read && wake - AHEAD_MS > readAt) {
        time.now = readAt + AHEAD_MS;
        await byObjectClock(() => stub.report(POLICY));
        read = true;
      }
      time.now = wake;
    };
    await holder.giveBackAtExpiry(calls, sleep);
    expect(handBacksAt.length, "handed back").toBe(1);
    expect
      .soft(handBacksAt[0], "by the object's deadline")
      .toBeLessThanOrEqual(M + MINUTE_MS + STRANDED_AFTER_MS);
    const [day] = (await byObjectClock(() => stub.report(POLICY))).days;
    expect(day, "two requests served, one stock permit unused").toMatchObject({
      admitted: 2,
      stranded: 0,
    });
  });
});
