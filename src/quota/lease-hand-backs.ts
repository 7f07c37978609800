import { clock, MINUTE_MS } from "../lib/clock";
import { CallsInFlight } from "./call-coordination";
import { HeldLeases } from "./held-lease";
import { GIVE_BACK_GRACE_MS } from "./lease";
import type { HolderDecision } from "./lease-in-hand";
import type {
  Admission,
  LeaseRequest,
  Renewal,
  RenewalRequest,
  ReturnedLease,
} from "./lease-messages";

/** How a holder reaches its key's object (see objects/quota-limiter-client.ts). */
export interface LeaseCalls {
  admit(request: LeaseRequest): Promise<Admission>;
  giveBack(returned: ReturnedLease): Promise<void>;
  /** Hands several leases back in one call (a location holder's); without it, one call each. */
  giveBackAll?(returning: ReturnedLease[]): Promise<void>;
  /** Asks for more permits on the lease in use, admitting no request. */
  renew?(request: RenewalRequest): Promise<Renewal>;
}

export type GiveBackCall = Pick<LeaseCalls, "giveBack" | "giveBackAll">;

/**
 * How a holder (LeaseHolder) hands permits back to the key's object: at a lease's expiry, after a
 * renewal, at the end of its standing permits, or all at once.
 */
export class LeaseHandBacks extends HeldLeases {
  protected readonly calls = new CallsInFlight();
  /** The end of standing permits whose hand-back is scheduled (see `handBackStandingAtEnd`). */
  #standingEndWatched = 0;

  /**
   * The work an admission leaves, not waited for by its request: a renewal it started, then the
   * hand-back of unused permits at expiry (or of leases retired meanwhile); null when none.
   */
  upkeep(decided: HolderDecision, calls: GiveBackCall): Promise<void> | null {
    const superseded = this.#handBackSuperseded(calls);
    const work = decided.renewal
      ? this.giveBackAfterRenewal(decided.renewal, calls)
      : decided.leaseGranted
        ? this.giveBackAtExpiry(calls)
        : null;
    return superseded && work
      ? Promise.all([superseded, work]).then(() => undefined)
      : (superseded ?? work);
  }

  /**
   * Once a renewal or refill has settled: the lease handed back at its expiry if it brought one,
   * else the retired leases now (superseded standing permits now either way).
   */
  giveBackAfterRenewal(renewal: Promise<boolean>, calls: GiveBackCall): Promise<void> {
    return renewal.then(async (renewed) => {
      if (!renewed) return this.giveBackRetired(calls);
      await Promise.all([this.#handBackSuperseded(calls), this.giveBackAtExpiry(calls)]);
    });
  }

  /** Hands back now the standing permits of an older policy (serving nothing), unless a call did. */
  #handBackSuperseded(calls: GiveBackCall): Promise<void> | null {
    if (!this.supersededWaiting) return null;
    this.supersededWaiting = false;
    return this.unreturned.length > 0 ? this.giveBackRetired(calls) : null;
  }

  /**
   * Hands the lease granted last back GIVE_BACK_GRACE_MS after its expiry, unless a request did
   * (meant for `waitUntil`); one no longer in use goes with the other retired ones, with what it
   * served, so no request need follow for that to be billed as admitted rather than stranded.
   */
  async giveBackAtExpiry(
    calls: GiveBackCall,
    sleep: (ms: number) => Promise<void> = clock.sleep,
  ): Promise<void> {
    const lease = this.lease;
    if (!lease) return this.giveBackRetired(calls);
    // A stock for the minute waits for the next minute's start too: the minute's refill hands it
    // back, if the key was used here, with no call of its own.
    // (The minute's start nearest its expiry: a clock ahead of the object's puts that after it.)
    const turn = Math.round(lease.expiresAt / MINUTE_MS) * MINUTE_MS;
    const due = lease.forTheMinute ? Math.max(lease.expiresAt, turn) : lease.expiresAt;
    await sleep(Math.max(0, due + GIVE_BACK_GRACE_MS - clock.now()));
    if (this.lease !== lease) return this.giveBackRetired(calls);
    // Only once it has really expired (again after any call in flight, which may renew it).
    const expired = () => this.lease === lease && clock.now() >= lease.expiresAt;
    if (!expired()) return;
    await this.calls.leaseCallsSettled();
    if (!expired()) return;
    // Granted with standing permits: it goes back with the next call or with them, and is kept
    // with them across an eviction (their alarm hands it back): the key's object waits for it as
    // long as for them, and would otherwise strand it only after their last minute.
    if (lease.withStanding && this.standing.lastUntil > clock.now()) this.#putAsideWithStanding();
    else await this.giveBackUnused(calls);
  }

  /** Puts the lease in use aside to go back with the standing permits (StandingStock.keepWaiting). */
  #putAsideWithStanding(): void {
    const lease = this.lease;
    const report = this.putLeaseAside();
    if (lease && report) this.standing.keepWaiting(report, lease.expiresAt, lease.policyVersion);
  }

  /**
   * GIVE_BACK_GRACE_MS after the last minute of the standing permits held now, hands back what
   * they and the leases retired meanwhile hold, unless later ones were granted since: the last
   * background call for a key that stopped calling here. Meant for `waitUntil`.
   */
  async handBackStandingAtEnd(
    calls: GiveBackCall,
    sleep: (ms: number) => Promise<void> = clock.sleep,
  ): Promise<void> {
    await this.calls.leaseCallsSettled();
    const end = this.standing.lastUntil;
    if (end === 0 || end === this.#standingEndWatched) return;
    this.#standingEndWatched = end;
    await sleep(Math.max(0, end + GIVE_BACK_GRACE_MS - clock.now()));
    if (this.standing.lastUntil !== end) return;
    await this.handBackStandingOrThrow(calls);
  }

  /**
   * Hands back now, in one call, the standing permits, the retired leases and the expired lease in
   * use; all stay held (and kept) until the object has them: a failure throws, the alarm retries.
   */
  async handBackStandingOrThrow(calls: GiveBackCall): Promise<void> {
    await this.calls.leaseCallsSettled();
    if (this.lease && clock.now() >= this.lease.expiresAt) this.putLeaseAside();
    const standing = this.standing.reportsKept();
    const retired = this.unreturned.splice(0).filter((r) => !standing.some((s) => s.id === r.id));
    const returning = [...retired, ...standing];
    if (returning.length === 0) return;
    const handedBack: Promise<unknown> = calls.giveBackAll
      ? calls.giveBackAll(returning)
      : Promise.all(returning.map((returned) => calls.giveBack(returned)));
    try {
      await this.calls.exclusively(handedBack);
    } catch (err) {
      // A lease handed back twice is credited once: the retired ones go with the next call too.
      this.returnLater(retired);
      throw err;
    }
    this.handedBack(standing);
  }

  /**
   * A call that carried `returning`, settled: answered, the standing permits reported with it are
   * held no more (`handedBack`) and `answered` takes the answer; failed, they wait again.
   */
  protected settle<T, R>(
    call: Promise<T>,
    returning: readonly ReturnedLease[],
    answered: (answer: T) => R,
    failed: () => void = () => undefined,
  ): Promise<R> {
    return call.then(
      (answer) => {
        this.handedBack(returning);
        return answered(answer);
      },
      (err: unknown) => {
        for (const r of returning) this.keepToReturn(r);
        failed();
        throw err;
      },
    );
  }

  /** The key's object answered a call carrying `returning`: its standing permits are held no more. */
  handedBack(returning: readonly ReturnedLease[]): void {
    this.standing.forget(returning.map((r) => r.id));
  }

  /** Stops holding the standing permits, unreported: the key's object settled them as stranded. */
  forgetStanding(): void {
    this.standing.forget(this.standing.reportsKept().map((r) => r.id));
  }

  /** Hands back every unused permit now; none are held while plain calls are in flight. */
  async giveBackUnused(calls: GiveBackCall): Promise<void> {
    await this.calls.leaseCallsSettled();
    if (this.calls.plainInFlight) return;
    this.putLeaseAside();
    await this.giveBackRetired(calls);
  }

  /** Hands back the unused permits of leases no longer in use. */
  async giveBackRetired(calls: GiveBackCall): Promise<void> {
    await this.calls.leaseCallsSettled();
    const returning = this.unreturned.splice(0);
    if (returning.length === 0) return;
    // What does not go back now goes with the next call (a lease handed back twice is credited once).
    const handedBack: Promise<unknown> = calls.giveBackAll
      ? calls.giveBackAll(returning).then(
          () => this.handedBack(returning),
          () => this.returnLater(returning),
        )
      : Promise.all(
          returning.map((returned) =>
            calls.giveBack(returned).catch(() => this.keepToReturn(returned)),
          ),
        );
    await this.calls.exclusively(handedBack);
  }
}
