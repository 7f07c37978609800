import { clock, MINUTE_MS } from "../lib/clock";
import { ExpiringMap } from "../lib/expiring-map";
import { logFailure } from "../lib/log";
import { countFailure, type Decision, EMPTY_USAGE, type UsageState } from "../quota/windows";
import type { AuthShield } from "./auth-shield";
import { callWithOneRetry, isOverloaded } from "./stub-call";

// Per shield, the requests this isolate counted itself while the shield was unreachable.
const countedHere = new ExpiringMap<string, UsageState>(10_000);

/**
 * Counts one request in AuthShield `shieldName` against `limit` per minute. Overloaded (the
 * client's own flood): refused until its minute ends, or flooding would switch the shield off;
 * unreachable: counted in this isolate, as an outage of the shield must not lock every client out.
 */
export async function countInShield(
  namespace: DurableObjectNamespace<AuthShield>,
  shieldName: string,
  limit: number,
): Promise<Decision> {
  try {
    return await callWithOneRetry<DurableObjectStub<AuthShield>, Decision>(
      () => namespace.getByName(shieldName),
      async (stub) => stub.countRequest(limit),
    );
  } catch (err) {
    const now = clock.now();
    if (isOverloaded(err)) {
      logFailure("warn", "shield overloaded; refusing the client until its window ends", err);
      const usedUp = { ...EMPTY_USAGE, minuteStart: now - (now % MINUTE_MS), minuteCount: limit };
      return countFailure(usedUp, limit, now).decision;
    }
    logFailure("warn", "shield unreachable; counting in the isolate", err);
    const previous = countedHere.get(shieldName, now) ?? EMPTY_USAGE;
    const { state, decision } = countFailure(previous, limit, now);
    countedHere.set(shieldName, state, state.minuteStart + MINUTE_MS);
    return decision;
  }
}
