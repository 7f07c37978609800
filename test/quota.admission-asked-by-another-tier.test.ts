// An isolate whose location holder forwarded its request (asking a stock, or standing permits,
// for itself) and whose answer was then lost falls back to the key's object with the same
// admission id. The object answers that id as it did the first time, with the lease granted then:
// the holder's, which the holder keeps. The isolate must neither use nor hand back that lease: handed
// back unused, the object counts its permits back while the holder still admits from them.
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { holderName } from "../src/objects/quota-holder";
import { QuotaLimiterClient } from "../src/objects/quota-limiter-client";
import { LeaseHolder } from "../src/quota/lease-holder";
import { newAdmissionId } from "../src/quota/lease-messages";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0 + 1_000);
const { passTime } = backgroundWork(time);
let seq = 0;

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});
afterEach(() => vi.restoreAllMocks());

/**
 * The location holders of `namespace`, whose first `admit` acts (the holder decides, forwarding the
 * request to the key's object) and then loses its answer on the way back to the isolate.
 */
function holdersLosingFirstAnswer(namespace: Env["QUOTA_HOLDER"]): Env["QUOTA_HOLDER"] {
  let lost = false;
  const getByName = (name: string) =>
    new Proxy(namespace.getByName(name) as unknown as Record<string, unknown>, {
      get: (target, prop) => {
        const value = Reflect.get(target, prop);
        if (prop !== "admit" || typeof value !== "function") return value;
        return async (...args: unknown[]) => {
          const answer = await Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
          if (lost) return answer;
          lost = true;
          throw new Error("the location holder is unreachable");
        };
      },
    });
  return { getByName } as unknown as Env["QUOTA_HOLDER"];
}

describe("an isolate's fallback to the key's object after its holder forwarded the request", () => {
  it("does not hand back the stock the key's object granted the holder with it: the minute admits no more than its limit", async () => {
    const keyId = `fallback_${++seq}`;
    const policy = policyWith(12, 1_000);
    const leases = new LeaseHolder();
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    // The key's first request here, from a quiet isolate: the holder forwards it and is granted a
    // stock of 2; its answer is lost, and the isolate asks the key's object with the same id.
    const first = await new QuotaLimiterClient(
      env.QUOTA,
      { id: keyId, region: null },
      { holders: holdersLosingFirstAnswer(env.QUOTA_HOLDER), name: "AMS" },
      leases,
    ).admit(policy, newAdmissionId(time.now));
    expect(first.reached && first.decision.outcome).toBe("allowed");
    // The work the isolate runs after its response (waitUntil).
    const afterResponse = first.reached ? first.afterResponse : null;
    await passTime();
    await afterResponse;
    await passTime();
    expect(await holder.unusedPermits(), "the holder holds its stock").toBe(2);

    // The rest of the minute: 16 more requests, one at a time, in this location.
    let admitted = 1;
    for (let i = 0; i < 16; i++) {
      time.now += 100;
      const a = await holder.admit(keyId, policy, null, newAdmissionId(time.now));
      if (a.reached && a.decision.outcome === "allowed") admitted++;
      await passTime();
    }
    expect(time.now).toBeLessThan(T0 + MINUTE_MS);
    expect(admitted, "admitted in one minute window of a key allowing 12").toBeLessThanOrEqual(12);
  });
});

describe("the key's object asked again an admission id whose grants were all handed back", () => {
  it("answers it with none of the standing permits it granted then (none is out)", async () => {
    const keyId = `known_id_${++seq}`;
    const policy = policyWith(60, 1_000);
    const object = env.QUOTA.getByName(keyId);
    const grantee = holderName(keyId, "AMS");
    const id = newAdmissionId(time.now);
    const ask = { want: 0, returning: [], standing: 1, admissionId: id };
    const first = await object.admit(policy, ask, grantee);
    const granted = first.standing ?? [];
    expect(granted.length, "standing permits granted").toBeGreaterThan(0);
    // Their holder hands them all back unused (a usage read there, say): none is out.
    await object.returnLeases({
      returnId: crypto.randomUUID(),
      returning: granted.map((s) => ({ id: s.id, unused: s.permits, used: 0 })),
    });
    time.now += 1_000;
    const again = await object.admit(policy, ask, grantee);
    expect(again.outcome).toBe("allowed");
    expect(again.standing ?? [], "no permit that is no longer counted").toEqual([]);
  });
});
