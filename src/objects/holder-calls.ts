import type { GiveBackCall, LeaseCalls } from "../quota/lease-holder";
import type { Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import type { QuotaLimiter } from "./quota-limiter";
import { callWithOneRetry, placedIn } from "./stub-call";

/**
 * A location holder's calls to its key's object (QuotaHolder): where the object is (its region,
 * as the key's last request here brought it) and under which name the holder asks, so the
 * object can tell it of changes.
 */
export class HolderCalls {
  /** The holder's bindings, read at each call (tests swap them on a live object). */
  readonly #env: () => Env;
  /** This holder's name (see `holderName`), or null when it has none (tests' unnamed objects). */
  readonly #name: string | null;
  /** The key's region, as the last request brought it. */
  region: Region | null = null;

  constructor(env: () => Env, name: string | null) {
    this.#env = env;
    this.#name = name;
  }

  stub(keyId: string): DurableObjectStub<QuotaLimiter> {
    return this.#env().QUOTA.getByName(keyId, placedIn(this.region));
  }

  /** Hands leases back (retried once). */
  giveBack(keyId: string): GiveBackCall {
    return {
      giveBack: (returned) =>
        callWithOneRetry(
          () => this.stub(keyId),
          async (stub) => stub.returnLease(returned),
        ),
    };
  }

  /** The calls for a request of `policy` (with its `admissionId`, if it has one). */
  to(keyId: string, policy: Policy, admissionId: string | null = null): LeaseCalls {
    return {
      admit: (request) =>
        callWithOneRetry(
          () => this.stub(keyId),
          async (stub) =>
            stub.admit(policy, admissionId ? { ...request, admissionId } : request, this.#name),
        ),
      giveBack: this.giveBack(keyId).giveBack,
      // Not retried, as in the isolate's client: a renewal counted twice would strand permits.
      renew: (request) => this.stub(keyId).renewLease(policy, request, this.#name),
    };
  }
}
