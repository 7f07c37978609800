// A release drained of standing permits (STANDING_PERMITS_DRAINED set, by `npm run rollback` and
// the deploy's rollback before they roll back, docs/operations.md) grants none: so once the
// longest standing horizon has passed, no minute to come holds a permit that the release before
// (which does not count them as a minute starts) could admit past the minute's limit. What was
// granted before the drain is still counted in its minute.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { configOrThrow } from "../src/lib/config";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import type { Admission, Renewal } from "../src/quota/lease-messages";
import { STANDING_MINUTES } from "../src/quota/standing";
import { fixClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const NINE = T0 - (T0 % DAY_MS) + 9 * 3_600_000;
const ask = { want: 0, returning: [], standing: 1 };
let seq = 0;

/**
 * Runs `use` on a QuotaLimiter of the key's object built with `settings` on top of the test
 * Worker's env (another version of the Worker: the same code, other settings), opened as the
 * runtime opens it.
 */
function asVersionWith<T>(
  stub: DurableObjectStub<QuotaLimiter>,
  settings: Record<string, string>,
  use: (limiter: QuotaLimiter) => T,
): Promise<T> {
  return runInDurableObject(stub, async (_, state) => {
    let opened: Promise<unknown> = Promise.resolve();
    const ctx = Object.create(state, {
      blockConcurrencyWhile: { value: (fn: () => Promise<unknown>) => (opened = fn()) },
    }) as DurableObjectState;
    const limiter = new QuotaLimiter(ctx, { ...env, ...settings });
    await opened;
    return use(limiter);
  });
}

describe("a release drained of standing permits", () => {
  it("reads STANDING_PERMITS_DRAINED: unset or empty grants them, any other value drains", () => {
    expect(configOrThrow(env).STANDING_PERMITS_DRAINED).toBe(false);
    expect(configOrThrow({ ...env, STANDING_PERMITS_DRAINED: "" }).STANDING_PERMITS_DRAINED).toBe(
      false,
    );
    for (const value of ["1", "2026-11-28T12:00:00Z", "off"])
      expect(
        configOrThrow({ ...env, STANDING_PERMITS_DRAINED: value }).STANDING_PERMITS_DRAINED,
      ).toBe(true);
  });

  it("grants no standing permits with an admission or a renewal, and still admits and leases", async () => {
    fixClock(NINE + 5_000);
    const stub = env.QUOTA.getByName(`standing-drain-${++seq}`);
    const drained = { STANDING_PERMITS_DRAINED: "1" };
    const admitted = await asVersionWith(stub, drained, (limiter) =>
      limiter.admit(POLICY, { ...ask, want: 2 }, "k@AMS"),
    );
    expect(admitted.outcome).toBe("allowed");
    expect(admitted.lease?.permits).toBe(2);
    expect(admitted.standing).toBeUndefined();
    const renewed: Renewal = await asVersionWith(stub, drained, (limiter) =>
      limiter.renewLease(
        POLICY,
        { leaseId: admitted.lease?.id ?? "", want: 2, holding: 0, returning: [], standing: 1 },
        "k@AMS",
      ),
    );
    expect(renewed.granted).not.toBeNull();
    expect(renewed.standing).toBeUndefined();
    // Nothing is held for a minute to come: 1 request and 4 leased permits, all this minute.
    const usage = await asVersionWith(stub, drained, (limiter) => limiter.usage(POLICY));
    expect(usage.day.count).toBe(1 + 2 + 2);
  });

  it("the same object, not drained, grants them (the test can fail)", async () => {
    fixClock(NINE + 5_000);
    const stub = env.QUOTA.getByName(`standing-drain-${++seq}`);
    const admitted: Admission = await asVersionWith(stub, {}, (limiter) =>
      limiter.admit(POLICY, ask, "k@AMS"),
    );
    expect(admitted.standing).toHaveLength(STANDING_MINUTES);
  });

  it("counts in their minute the standing permits granted before the drain", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = env.QUOTA.getByName(`standing-drain-${++seq}`);
    const before = await stub.admit(POLICY, ask, "k@AMS");
    expect(before.standing).toHaveLength(STANDING_MINUTES);
    time.now = NINE + MINUTE_MS + 5_000;
    const next = await asVersionWith(stub, { STANDING_PERMITS_DRAINED: "1" }, (limiter) => {
      const admission = limiter.admit(POLICY, ask, "k@AMS");
      return { admission, usage: limiter.usage(POLICY) };
    });
    expect(next.admission.standing).toBeUndefined();
    // The minute's standing permit and the request decided in it.
    expect(next.usage.minute.count).toBe(2);
  });
});
