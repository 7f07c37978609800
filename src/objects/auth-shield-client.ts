import { clock, MINUTE_MS } from "../lib/clock";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";
import {
  AUTH_FAILURES_PER_MINUTE,
  countFailure,
  type Decision,
  EMPTY_USAGE,
  type UsageState,
} from "../quota/windows";
import type { AuthShield } from "./auth-shield";
import { callWithOneRetry, isOverloaded } from "./stub-call";

// Per client, the failures this isolate counted itself while the client's shield was unreachable.
const countedHere = new ExpiringMap<string, UsageState>(10_000);

/**
 * Counts one failed authentication in the client's AuthShield (the only code that calls its
 * stub) and returns its decision. When the shield does not answer, the limit still holds:
 * - overloaded: the client's own failures flood it, so the client is refused until its minute
 *   window ends (never let through, or flooding would switch the shield off);
 * - unreachable (an outage): this isolate counts the client's failures itself, with the same
 *   rule and limit, so a guessing client gets at most that many per isolate and minute, while
 *   the 401s go on (an outage of the shield must not lock every client out).
 */
export function recordAuthFailure(
  namespace: DurableObjectNamespace<AuthShield>,
  shieldName: string,
): Promise<Decision> {
  return countInShield(namespace, shieldName, AUTH_FAILURES_PER_MINUTE);
}

/**
 * Counts one request in the shield object `shieldName` against `limit` per minute, with the
 * same fallbacks as recordAuthFailure when the object does not answer.
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
      log("warn", "auth shield overloaded; refusing the client", { error: String(err) });
      const resetAt = now - (now % MINUTE_MS) + MINUTE_MS;
      return {
        outcome: "rate_limited",
        retryAt: resetAt,
        now,
        windows: [{ name: "minute", limit, remaining: 0, resetAt, seconds: 60 }],
      };
    }
    log("warn", "auth shield unreachable; counting failures in the isolate", {
      error: String(err),
    });
    const previous = countedHere.get(shieldName, now) ?? EMPTY_USAGE;
    const { state, decision } = countFailure(previous, limit, now);
    countedHere.set(shieldName, state, state.minuteStart + MINUTE_MS);
    return decision;
  }
}
