// How big a location holder's stock is (src/objects/lease-ledger.ts `lend`): sized to the
// requests it expects in the rest of the minute only while it is the key's only holder (no other
// asked within STOCK_SHARED_WITHIN_MS, and no lease of another is out) and the stock lives the
// minute; else what it asked for.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS } from "../src/lib/clock";
import { heldBound, STOCK_SHARED_WITHIN_MS } from "../src/quota/lease";
import { STANDING_MINUTES } from "../src/quota/standing";
import { fixClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const NINE = T0 - (T0 % DAY_MS) + 9 * 3_600_000;
let seq = 0;
const newLimiter = () => env.QUOTA.getByName(`lease-sizing-${++seq}`);
/** A location holder's ask: `want` permits, or the minute's `minuteWant` when it may be sized. */
const stockAsk = { want: 2, returning: [], minuteWant: 10 };

describe("a location holder's stock for the minute", () => {
  it("is sized to the minute when no other has asked within STOCK_SHARED_WITHIN_MS, and not before", async () => {
    for (const [after, sized] of [
      [STOCK_SHARED_WITHIN_MS - 1, false],
      [STOCK_SHARED_WITHIN_MS, true],
    ] as const) {
      const time = fixClock(NINE + 5_000);
      const stub = newLimiter();
      const other = await stub.admit(POLICY, { want: 2, returning: [] }, "k@FRA");
      await stub.returnLease({ id: other.lease!.id, unused: 2, used: 0 });
      time.now = NINE + 5_000 + after;
      const mine = await stub.admit(POLICY, stockAsk, "k@AMS");
      expect(mine.lease?.permits, `${after} ms after the other's ask`).toBe(
        sized ? heldBound(POLICY) : stockAsk.want,
      );
    }
  });

  it("is sized to the minute after requests that asked for no lease: a request decided alone is no ask for permits", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    await stub.admit(POLICY, { want: 0, returning: [] }); // an isolate's
    await stub.admit(POLICY, { want: 0, returning: [] }, "k@FRA"); // another holder's
    const mine = await stub.admit(POLICY, stockAsk, "k@AMS");
    expect(mine.lease?.permits).toBe(heldBound(POLICY));
  });

  it("is not sized to the minute while another holder's permits are out (standing permits for minutes to come)", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    const other = await stub.admit(POLICY, { want: 0, returning: [], standing: 1 }, "k@FRA");
    expect(other.standing?.length).toBeGreaterThan(0);
    const mine = await stub.admit(POLICY, stockAsk, "k@AMS");
    expect(mine.lease?.permits).toBe(stockAsk.want);
  });

  it("is not sized to the minute after another holder's renewal asked for standing permits only, though it got none", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    // FRA holds nearly every standing permit the key may have out (STANDING_MINUTES × heldBound):
    // fewer are left than AMS asks for in a minute.
    const ask = { want: 0, returning: [], standing: 2, standingMinutes: 30 };
    expect((await stub.admit(POLICY, ask, "k@FRA")).standing?.length).toBeGreaterThan(
      STANDING_MINUTES,
    );
    const other = await stub.renewLease(
      POLICY,
      { leaseId: "", want: 0, holding: 0, returning: [], standing: 4 },
      "k@AMS",
    );
    expect(other.standing).toBeUndefined();
    const mine = await stub.admit(POLICY, stockAsk, "k@FRA");
    expect(mine.lease?.permits).toBe(stockAsk.want);
  });

  it("near a limit (a minute-sized stock would not live the minute), is what was asked for", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    // 29 left in the day after this request: a stock of 6 would leave less than 4 × heldBound.
    const tight = policyWith(60, 30);
    const mine = await stub.admit(tight, stockAsk, "k@AMS");
    expect(mine.outcome).toBe("allowed");
    expect(mine.lease?.permits).toBe(stockAsk.want);
  });
});

describe("a renewal of a lease granted in an earlier minute", () => {
  it("gets a new lease sized as if it held nothing: the earlier minute's unused permits are not held in this one", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const bound = heldBound(POLICY);
    const first = await stub.admit(POLICY, { want: bound, returning: [] }, "k@AMS");
    expect(first.lease?.permits).toBe(bound);
    time.now = NINE + 65_000;
    const renewal = await stub.renewLease(
      POLICY,
      { leaseId: first.lease!.id, want: 2, holding: 0, used: 0, returning: [] },
      "k@AMS",
    );
    expect(renewal.granted?.permits).toBe(2);
    expect(renewal.granted?.id).not.toBe(first.lease!.id);
  });
});
