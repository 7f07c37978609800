import type { GiveBackCall, LeaseCalls } from "../quota/lease-holder";
import type { ReturnedLease } from "../quota/lease-messages";
import type { Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import type { QuotaLimiter } from "./quota-limiter";
import { callWithOneRetry, placedIn } from "./stub-call";

/** A location holder's calls to its key's object, under the holder's name (told of changes). */
export class HolderCalls {
  /** The key's region, as the last request brought it. */
  region: Region | null = null;

  constructor(
    /** The holder's bindings, read at each call (tests swap them on a live object). */
    private readonly env: () => Env,
    /** This holder's name (see `holderName`), or null when it has none (tests' unnamed objects). */
    private readonly name: string | null,
  ) {}

  stub(keyId: string): DurableObjectStub<QuotaLimiter> {
    return this.env().QUOTA.getByName(keyId, placedIn(this.region));
  }

  #retried<T>(keyId: string, call: (stub: DurableObjectStub<QuotaLimiter>) => Promise<T>) {
    return callWithOneRetry(() => this.stub(keyId), call);
  }

  /** Hands leases back (retried once): one, or several in one call. */
  giveBack(keyId: string): GiveBackCall {
    const one = (returned: ReturnedLease) =>
      this.#retried(keyId, async (stub) => stub.returnLease(returned));
    // Several in one call with one id, retried with the same id: taken back once.
    const all = async (returning: ReturnedLease[]) => {
      const [only] = returning;
      if (returning.length === 1 && only) return one(only);
      const batch = { returnId: crypto.randomUUID(), returning };
      await this.#retried(keyId, async (stub) => stub.returnLeases(batch));
    };
    return { giveBack: one, giveBackAll: all };
  }

  /** The calls for a request of `policy` (with its `admissionId`, if it has one). */
  to(keyId: string, policy: Policy, admissionId: string | null = null): LeaseCalls {
    return {
      admit: async (request) => {
        let attempts = 0;
        const answer = await this.#retried(keyId, async (stub) => {
          attempts++;
          return stub.admit(policy, admissionId ? { ...request, admissionId } : request, this.name);
        });
        // Answered as before on a first attempt: the lease and standing permits went to an earlier
        // call (this holder before it was started again), which may have used them: none is used
        // here (they stay counted, stranded if nobody hands them back).
        if (attempts > 1 || !answer.repeated) return answer;
        const { lease: _, standing: __, ...decision } = answer;
        return { ...decision, lease: null };
      },
      ...this.giveBack(keyId),
      // Not retried, as in the isolate's client: a renewal counted twice would strand permits.
      renew: (request) => this.stub(keyId).renewLease(policy, request, this.name),
    };
  }
}
