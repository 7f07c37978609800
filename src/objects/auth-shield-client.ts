import { log } from "../lib/log";
import type { Decision } from "../quota/windows";
import type { AuthShield } from "./auth-shield";
import { callWithOneRetry } from "./stub-call";

/**
 * Counts one failed authentication in the client's AuthShield (the only code that calls its
 * stub). Unreachable: null, and the caller answers 401 without a failure window (fail open:
 * an outage of the shield must not lock every client out).
 */
export async function recordAuthFailure(
  namespace: DurableObjectNamespace<AuthShield>,
  shieldName: string,
): Promise<Decision | null> {
  try {
    return await callWithOneRetry<DurableObjectStub<AuthShield>, Decision>(
      () => namespace.getByName(shieldName),
      async (stub) => stub.recordFailure(),
    );
  } catch (err) {
    log("warn", "auth shield unreachable; failing open", { error: String(err) });
    return null;
  }
}
