import { clock, minuteEndOf } from "../lib/clock";
import { logFailure } from "../lib/log";
import { logPersistentFailure } from "../quota/fail-open";
import { QUIET_STOCK } from "../quota/lease";
import { LeaseHolder } from "../quota/lease-holder";
import type { Admission, LeaseRequest, SharedStock } from "../quota/lease-messages";
import type { Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import { HolderCalls } from "./holder-calls";
import type { HeldKeyRecord } from "./holder-key-record";
import {
  HAND_BACK_RETRY_MS,
  HolderStandingMemory,
  RESTORED_STANDING_MARGIN_MS,
} from "./holder-standing-memory";
import { STRANDED_AFTER_MS } from "./lease-ledger";
import type { HolderAnswer } from "./quota-holder";
import { callWithOneRetry, isOverloaded, persistentFailureOf } from "./stub-call";

/**
 * A location holder's stock of its key's permits: decides requests from it or forwards them, keeps
 * it topped up while the key is used here, and hands it back. Its standing permits and key copy are
 * kept across an eviction (HolderStandingMemory); permits lost with the rest stay counted.
 */
export class LocationStock {
  readonly #leases = new LeaseHolder({ stock: QUIET_STOCK });
  readonly #calls: HolderCalls;
  readonly #memory: HolderStandingMemory;
  /** The key this stock is of (null: no request yet, and nothing kept). */
  #keyId: string | null = null;
  /** The minute start a refill is due at (0: none, or an isolate took the stock since). */
  #refillAt = 0;
  /** The minute start a timer is set for: one per turn, whether a refill is still due then or not. */
  #turnWatched = 0;
  /** The newest policy a request brought (a refill asks under it). */
  #policy: Policy | null = null;
  /** The last ban this holder learnt from its copy of the key (`applyRecordedBan`), 0: none. */
  #recordedBanApplied = 0;

  /**
   * Holds again the standing permits kept in `storage` (evicted while holding them: a key calling
   * every few minutes is answered here), and keeps them there. `name`: see `holderName`.
   */
  constructor(
    storage: DurableObjectStorage,
    env: () => Env,
    name: string | null,
    keyRecord: HeldKeyRecord,
  ) {
    this.#calls = new HolderCalls(env, name);
    this.#memory = new HolderStandingMemory(storage, this.#leases, keyRecord);
    const kept = this.#memory.kept();
    if (kept) {
      this.#keyId = kept.keyId;
      this.#calls.region = kept.region;
      this.#leases.restoreStanding(kept, RESTORED_STANDING_MARGIN_MS);
      if (kept.key) keyRecord.restore(kept.key);
    }
    const keep = () => this.#memory.keep(this.#owner);
    this.#leases.onStandingChange(keep);
    keyRecord.onChange = keep;
  }

  /** Whose standing permits are kept (null: none yet). */
  get #owner(): { keyId: string; region: Region | null } | null {
    return this.#keyId === null ? null : { keyId: this.#keyId, region: this.#calls.region };
  }

  /** At the start of each call to the holder: a write of the standing permits not made before. */
  entered(): void {
    this.#memory.keepOwed(this.#owner);
  }

  /**
   * The alarm: the standing permits' end came while evicted, or their hand-back failed: back, kept
   * till confirmed, retried HAND_BACK_RETRY_MS on while the object waits (taken back once), then
   * dropped (it has settled them as stranded).
   */
  async alarm(): Promise<void> {
    const owner = this.#owner;
    if (owner === null) return;
    const now = clock.now();
    if (now < this.#memory.handBackDueAt) return this.#memory.rearm(owner);
    try {
      await this.#leases.handBackStandingOrThrow(this.#calls.giveBack(owner.keyId));
    } catch (err) {
      logFailure("warn", "a location holder could not hand back its standing permits", err, {
        keyId: owner.keyId,
      });
      const retryAt = now + HAND_BACK_RETRY_MS;
      if (retryAt < this.#leases.standingUntil + STRANDED_AFTER_MS) this.#memory.retryAt(retryAt);
      else this.#leases.forgetStanding();
    }
  }

  async decide(
    keyId: string,
    policy: Policy,
    region: Region | null,
    admissionId: string | null,
  ): Promise<HolderAnswer> {
    this.#calls.region = region;
    this.#keyId = keyId;
    const calls = this.#calls.to(keyId, policy, admissionId);
    try {
      const decided = await this.#leases.admit(policy, calls, admissionId);
      // The key's arrival here, kept with the standing permits it will size their next ask.
      if (this.#leases.standingUntil > 0) this.#memory.keep(this.#owner);
      this.#inBackground(keyId, this.#leases.upkeep(decided, calls));
      this.#inBackground(keyId, this.#leases.handBackStandingAtEnd(calls));
      this.#refillWhenTheMinuteTurns(keyId, policy);
      if (this.#leases.sharingAsked) {
        this.#leases.sharingAsked = false;
        this.#inBackground(keyId, this.#refillNow(keyId, policy));
      }
      return { reached: true, decision: decided.decision, fromStock: decided.local };
    } catch (err) {
      return this.#noDecision(keyId, err);
    }
  }

  /** Request `admissionId` asked of the key's object alone, with no stock taken or used here. */
  async askObject(
    keyId: string,
    policy: Policy,
    region: Region | null,
    admissionId: string,
  ): Promise<HolderAnswer> {
    this.#calls.region = region;
    try {
      const calls = this.#calls.to(keyId, policy, admissionId);
      const { lease: _, standing: __, ...decision } = await calls.admit({ want: 0, returning: [] });
      return { reached: true, decision, fromStock: false };
    } catch (err) {
      return this.#noDecision(keyId, err);
    }
  }

  /** Why the key's object gave no decision (`err`), logged, with the refusal last seen here. */
  #noDecision(keyId: string, err: unknown): HolderAnswer {
    const persistentFailure = persistentFailureOf(err);
    // A failure for good repeats on every request: logged once a minute, not per request.
    if (persistentFailure) logPersistentFailure(keyId, persistentFailure, clock.now());
    else
      logFailure("warn", "a location holder could not reach the key's quota object", err, {
        keyId,
      });
    return {
      reached: false,
      overloaded: isOverloaded(err),
      refusal: this.#leases.refusal(clock.now()),
      persistentFailure,
    };
  }

  /**
   * Forwards an isolate's call for a lease of its own, handing this holder's stock back in the
   * same call (one tier at a time holds the key's permits in a location, so the isolate's
   * X-RateLimit-Remaining is exact there); if the call throws, it goes with the next call.
   */
  async forIsolate(
    keyId: string,
    policy: Policy,
    request: LeaseRequest,
    region: Region | null = null,
  ): Promise<Admission> {
    this.#calls.region = region;
    this.#refillAt = 0; // one tier at a time: no refill at the turn unless it decides again
    const stock = this.#leases.surrender();
    try {
      const admission = await callWithOneRetry(
        () => this.#calls.stub(keyId),
        async (stub) =>
          stub.admit(policy, { ...request, returning: [...request.returning, ...stock] }),
      );
      this.#leases.handedBack(stock);
      // A copy: the call's own result holds its connection (and this object) until disposed.
      return { ...admission };
    } catch (err) {
      this.#leases.returnLater(stock);
      throw err;
    }
  }

  /** Hands the whole stock back now, admitting no more (before a usage read, or a change here). */
  async giveBack(keyId: string): Promise<void> {
    this.#leases.dropLeaseAndRefusals();
    await this.#leases.giveBackUnused(this.#calls.giveBack(keyId));
  }

  /**
   * The holder's copy of the key says the key's object banned it until `bannedUntil` (recorded in
   * D1 by the object's alarm): once per ban, unless a refusal for it was already answered here,
   * stops admitting from the stock and standing permits as the ban's push would have (a push can
   * be lost), so that the key's next request here is forwarded and refused until the ban ends.
   */
  applyRecordedBan(keyId: string, bannedUntil: number | null, now: number): void {
    if (bannedUntil === null || bannedUntil <= now || bannedUntil === this.#recordedBanApplied)
      return;
    this.#recordedBanApplied = bannedUntil;
    if (this.#leases.refusal(now)?.outcome !== "key_banned") this.dropAndHandBack(keyId);
  }

  /** Stops admitting from the stock at once, and hands it back in the background. */
  dropAndHandBack(keyId: string): void {
    this.#inBackground(keyId, this.giveBack(keyId));
  }

  /**
   * Shares heldBound (QuotaHolder.restock): what a stock above a shared one gave up, else a stock
   * asked for (LeaseHolder.restock), settling once answered; neither for a key not seen here.
   */
  async restock(keyId: string): Promise<SharedStock | null> {
    const policy = this.#policy;
    if (policy === null || this.#keyId !== keyId) return null;
    const shared = this.#leases.share(policy);
    if (shared) return shared;
    await this.#refillNow(keyId, policy);
    return null;
  }

  /** Asks for a stock now if none is usable (LeaseHolder.restock), settling once answered. */
  async #refillNow(keyId: string, policy: Policy): Promise<void> {
    const calls = this.#calls.to(keyId, policy);
    const refill = this.#leases.restock(policy, calls);
    if (!refill) return;
    this.#inBackground(keyId, this.#leases.giveBackAfterRenewal(refill, calls));
    await refill.catch(() => undefined);
  }

  /** Whether it holds standing permits of a minute not over at `now`. */
  holdsStanding(now: number): boolean {
    return this.#leases.standingHeldUntil > now;
  }

  /** Permits in stock or waiting to go back. */
  get unusedPermits(): number {
    return this.#leases.unusedPermits;
  }

  /**
   * Leases end with their minute: a key decided here this minute gets a fresh stock as the next
   * begins, so its first requests wait for no far call; none once an isolate took the stock (it
   * renews its own), or for a key not expected in that minute (standing, or gone quiet).
   */
  #refillWhenTheMinuteTurns(keyId: string, policy: Policy): void {
    if (!this.#policy || policy.version > this.#policy.version) this.#policy = policy;
    const now = clock.now();
    const next = minuteEndOf(now);
    this.#refillAt = next;
    if (this.#turnWatched === next) return;
    this.#turnWatched = next;
    this.#inBackground(
      keyId,
      clock.sleep(next - now).then(async () => {
        const latest = this.#policy ?? policy;
        const calls = this.#calls.to(keyId, latest);
        const due = this.#refillAt === next && this.#leases.refillDueAt(next);
        const refill = due ? this.#leases.refill(latest, calls) : null;
        if (refill) await this.#leases.giveBackAfterRenewal(refill, calls);
        await this.#leases.handBackStandingAtEnd(calls);
      }),
    );
  }

  #inBackground(keyId: string, work: Promise<void> | null): void {
    // The object stays in memory while the key is used here; work lost with it costs permits
    // that stay counted, never an admission that was not.
    work
      ?.catch((err: unknown) =>
        logFailure("warn", "a location holder's lease upkeep failed", err, { keyId }),
      )
      // Kept again once its stock changed (granted, handed back): the windows kept count what an
      // eviction would lose of it as used (LeaseHolder.standingMemory).
      .then(() => {
        if (this.#leases.standingUntil > 0) this.#memory.keep(this.#owner);
      })
      .catch((err: unknown) =>
        logFailure("warn", "a location holder could not keep its standing permits", err, { keyId }),
      );
  }
}
