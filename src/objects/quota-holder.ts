import { DurableObject } from "cloudflare:workers";
import { clock, MINUTE_MS } from "../lib/clock";
import { log } from "../lib/log";
import { QUIET_STOCK } from "../quota/lease";
import { type GiveBackCall, type LeaseCalls, LeaseHolder } from "../quota/lease-holder";
import type { KeyDecision, Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import type { QuotaLimiter } from "./quota-limiter";
import { callWithOneRetry, isOverloaded, placedIn } from "./stub-call";

/**
 * A location holder's answer: the decision (from its stock, or forwarded to the key's object),
 * or why there is none (the key's object is overloaded or unreachable from here).
 */
export type HolderAnswer =
  | { reached: true; decision: KeyDecision; fromStock: boolean }
  | { reached: false; overloaded: boolean };

/** The name of the holder of key `keyId` in location `location` (a Cloudflare colo). */
export const holderName = (keyId: string, location: string): string => `${keyId}@${location}`;

/**
 * One per key per location (named by `holderName`): the location tier between the isolates and
 * the key's QuotaLimiter. Isolates in the location send it the requests they cannot decide
 * themselves, over a local hop. It admits them from a stock of permits the key's object leased
 * to it (counted there when granted, so nothing is admitted that was not counted), keeps that
 * stock topped up in the background while the key is used here, and forwards a request to the
 * key's object whenever the stock is out or the key is near its limit: it never refuses on its
 * own, so 429s, Retry-After, the ban and the usage view are the object's. The stock lives in
 * memory only; permits lost with it stay counted (within heldBound, see docs/quotas.md).
 */
export class QuotaHolder extends DurableObject<Env> {
  readonly #leases = new LeaseHolder({ stock: QUIET_STOCK });
  /** The start of the minute for which a refill is scheduled (0: none). */
  #refillAt = 0;
  /** The newest policy a request brought (a refill asks under it). */
  #policy: Policy | null = null;
  /** The key's region, as the last request brought it (see `admit`). */
  #region: Region | null = null;

  /**
   * Decides one request of key `keyId` under `policy` (the caller's view of the key); `region`
   * is where the key's object is created if this holder's call is its first.
   */
  async admit(keyId: string, policy: Policy, region: Region | null = null): Promise<HolderAnswer> {
    this.#region = region;
    const calls = this.#callsTo(keyId, policy);
    try {
      const decided = await this.#leases.admit(policy, calls);
      this.#inBackground(keyId, this.#leases.upkeep(decided, calls));
      this.#refillWhenTheMinuteTurns(keyId, policy);
      return { reached: true, decision: decided.decision, fromStock: decided.local };
    } catch (err) {
      log("warn", "a location holder could not reach the key's quota object", {
        keyId,
        error: String(err),
      });
      return { reached: false, overloaded: isOverloaded(err) };
    }
  }

  /**
   * Hands the whole stock back to the key's object now and stops admitting from it (before a
   * usage read, or after a change to the key made in this location).
   */
  async giveBack(keyId: string): Promise<void> {
    this.#leases.dropLease();
    this.#leases.forgetRefusals();
    await this.#leases.giveBackUnused(this.#giveBackCall(keyId));
  }

  /**
   * The key's policy changed (told by the key's object): stops admitting from the stock at once,
   * so the key's next requests here are forwarded to the object, and hands the stock back.
   */
  async keyChanged(keyId: string): Promise<void> {
    this.#leases.dropLease();
    this.#leases.forgetRefusals();
    this.#inBackground(keyId, this.#leases.giveBackUnused(this.#giveBackCall(keyId)));
  }

  /** Permits in stock or waiting to go back (for tests and the bench). */
  unusedPermits(): number {
    return this.#leases.unusedPermits;
  }

  /**
   * Leases end with their minute, so a key used here this minute gets a fresh stock as the next
   * one begins, in the background: its first requests there wait for no far call. A key not used
   * here for a whole minute gets none (what it holds goes back at its lease's expiry).
   */
  #refillWhenTheMinuteTurns(keyId: string, policy: Policy): void {
    if (!this.#policy || policy.version > this.#policy.version) this.#policy = policy;
    const now = clock.now();
    const next = now - (now % MINUTE_MS) + MINUTE_MS;
    if (this.#refillAt === next) return;
    this.#refillAt = next;
    this.#inBackground(
      keyId,
      clock.sleep(next - now).then(async () => {
        const latest = this.#policy ?? policy;
        const calls = this.#callsTo(keyId, latest);
        const refill = this.#leases.refill(latest, calls);
        if (!refill) return;
        const refilled = await refill;
        await (refilled
          ? this.#leases.giveBackAtExpiry(calls)
          : this.#leases.giveBackRetired(calls));
      }),
    );
  }

  #inBackground(keyId: string, work: Promise<void> | null): void {
    // The object stays in memory while the key is used here; work lost with it costs permits
    // that stay counted, never an admission that was not.
    work?.catch((err: unknown) =>
      log("warn", "a location holder's lease upkeep failed", { keyId, error: String(err) }),
    );
  }

  /** This holder's name (see `holderName`), under which the key's object tells it of changes. */
  get #name(): string | null {
    return this.ctx.id.name ?? null;
  }

  #stub(keyId: string): DurableObjectStub<QuotaLimiter> {
    return this.env.QUOTA.getByName(keyId, placedIn(this.#region));
  }

  #giveBackCall(keyId: string): GiveBackCall {
    return {
      giveBack: (returned) =>
        callWithOneRetry(
          () => this.#stub(keyId),
          async (stub) => stub.returnLease(returned),
        ),
    };
  }

  #callsTo(keyId: string, policy: Policy): LeaseCalls {
    return {
      admit: (request) =>
        callWithOneRetry(
          () => this.#stub(keyId),
          async (stub) => stub.admit(policy, request, this.#name),
        ),
      giveBack: this.#giveBackCall(keyId).giveBack,
      // Not retried, as in the isolate's client: a renewal counted twice would strand permits.
      renew: (request) => this.#stub(keyId).renewLease(policy, request, this.#name),
    };
  }
}
