import type { KeyRecord } from "../db/keys";
import { unavailable } from "../lib/errors";
import { log } from "../lib/log";
import type { KeyDecision, Policy } from "../quota/windows";
import type { Claim, StoredResponse } from "./idempotency-table";
import type { KeyUsage, QuotaLimiter } from "./quota-limiter";
import { callWithOneRetry, isOverloaded } from "./stub-call";

/** What a key's quota object enforces for it: the key's limits, version and revocation. */
export function policyOf(key: KeyRecord): Policy {
  return { ...key.limits, version: key.version, revoked: key.revokedAt !== null };
}

/** The object's answer, or why there is none. */
export type AdmitResult =
  | { reached: true; decision: KeyDecision }
  | { reached: false; overloaded: boolean };

/**
 * The Worker's side of one key's QuotaLimiter: the only code that calls its stub. Every call is
 * retried once on a `.retryable` error (stub-call.ts); what happens when it still fails is the
 * call site's policy, stated on each method.
 */
export class QuotaLimiterClient {
  constructor(
    private readonly namespace: DurableObjectNamespace<QuotaLimiter>,
    private readonly keyId: string,
  ) {}

  /** Decides and counts one request. Unreachable: `{ reached: false }` (the caller decides). */
  async admit(policy: Policy): Promise<AdmitResult> {
    try {
      return {
        reached: true,
        decision: await this.#call<KeyDecision>(async (stub) => stub.admit(policy)),
      };
    } catch (err) {
      log("warn", "quota limiter unreachable", { keyId: this.keyId, error: String(err) });
      return { reached: false, overloaded: isOverloaded(err) };
    }
  }

  /** Unreachable: null, and the create relies on the database's unique reference alone. */
  async claimIdempotencyKey(idempotencyKey: string, fingerprint: string): Promise<Claim | null> {
    try {
      return await this.#call<Claim>(async (stub) =>
        stub.claimIdempotencyKey(idempotencyKey, fingerprint),
      );
    } catch (err) {
      log("warn", "idempotency records unreachable; relying on the database guard", {
        keyId: this.keyId,
        error: String(err),
      });
      return null;
    }
  }

  /** Unreachable: ignored; a retry then takes the claim over and the database guard replays. */
  async completeIdempotencyKey(idempotencyKey: string, response: StoredResponse): Promise<void> {
    await this.#call((stub) => stub.completeIdempotencyKey(idempotencyKey, response)).catch(
      (err: unknown) =>
        log("warn", "could not complete an idempotency record", { error: String(err) }),
    );
  }

  /** Unreachable: ignored; the claim lapses on its own. */
  async releaseIdempotencyKey(idempotencyKey: string): Promise<void> {
    await this.#call((stub) => stub.releaseIdempotencyKey(idempotencyKey)).catch((err: unknown) =>
      log("warn", "could not release an idempotency claim", { error: String(err) }),
    );
  }

  /** Current usage for the admin views. Unreachable: null (the view says so). */
  async usage(offered: Policy): Promise<KeyUsage | null> {
    return this.#call<KeyUsage>(async (stub) => stub.usage(offered)).catch((err: unknown) => {
      log("warn", "quota limiter unreachable for a usage view", {
        keyId: this.keyId,
        error: String(err),
      });
      return null;
    });
  }

  /** Pushes a newer policy. Unreachable: throws 503, since the change is not enforced yet. */
  async configureOrThrow(policy: Policy): Promise<void> {
    await this.#call((stub) => stub.configure(policy)).catch((err: unknown) => {
      log("error", "could not push key policy", { keyId: this.keyId, error: String(err) });
      throw unavailable("The change is saved but not yet enforced everywhere; repeat the request.");
    });
  }

  /** Lifts the ban. Unreachable: throws 503. */
  async unbanOrThrow(offered: Policy): Promise<KeyUsage> {
    return this.#call<KeyUsage>(async (stub) => stub.unban(offered)).catch((err: unknown) => {
      log("error", "could not unban", { keyId: this.keyId, error: String(err) });
      throw unavailable("The key's quota object could not be reached; repeat the request.");
    });
  }

  #call<T>(call: (stub: DurableObjectStub<QuotaLimiter>) => Promise<T>): Promise<T> {
    return callWithOneRetry(() => this.namespace.getByName(this.keyId), call);
  }
}
