import { clock, MINUTE_MS } from "../lib/clock";
import { ArrivalRate } from "./arrival-rate";
import { CallsInFlight, withDeadline } from "./call-coordination";
import {
  GIVE_BACK_GRACE_MS,
  grantedForTheMinute,
  LEASE_TIMINGS,
  type LeaseInUse,
  minuteStockWanted,
  renewsNow,
} from "./lease";
import type {
  Admission,
  Lease,
  LeaseRequest,
  Renewal,
  RenewalRequest,
  ReturnedLease,
} from "./lease-messages";
import { ShownWindows } from "./shown-windows";
import type { KeyDecision, Policy, SeenRefusal, WindowStatus } from "./windows";

/** How a holder reaches its key's object (objects/quota-limiter-client.ts supplies the stub calls). */
export interface LeaseCalls {
  admit(request: LeaseRequest): Promise<Admission>;
  giveBack(returned: ReturnedLease): Promise<void>;
  /**
   * Asks for more permits on the lease in use, admitting no request. Without it (a holder that
   * only hands permits back), a lease is asked for only once the one in use is over.
   */
  renew?(request: RenewalRequest): Promise<Renewal>;
}

/** What handing permits back needs of the calls. */
export type GiveBackCall = Pick<LeaseCalls, "giveBack">;

/** A decision, and whether it came from the isolate's lease rather than from the object. */
export interface HolderDecision {
  decision: KeyDecision;
  /** Decided here, from the lease, with no call. */
  local: boolean;
  /** This call was granted a new lease (its unused permits go back at expiry). */
  leaseGranted: boolean;
  /**
   * A renewal of the lease this request started and does not wait for (for `waitUntil`); it
   * settles with the renewed lease, or null when the renewal brought no lease to give back.
   */
  renewal: Promise<boolean> | null;
}

interface HeldLease extends LeaseInUse {
  id: string;
  policyVersion: number;
  /** Requests admitted from it: reported with its renewals and its hand-back (the usage history counts them). */
  used: number;
  /** The admission ids of those not reported yet (a location holder's; see ReturnedLease). */
  admissionIds: string[];
}

/**
 * When a lease ends by this holder's own clock. A lease never outlives the minute it was counted
 * in (quota/lease.ts), and the holder must not admit from it once that minute is over by the
 * object's clock, whatever its own reads: the object then admits a whole new minute. So the time
 * the minute had left when the object answered (`answer.now`) is counted from `sentAt`, when this
 * holder asked (before the answer, whatever the two clocks read), and the lease ends then if that
 * comes before its expiry. With clocks that agree this changes nothing but for a lease that ends
 * with its minute, which ends a round trip early. An answer that does not say when it was given
 * (an object of an earlier release) is read by the object's expiry.
 */
export function localExpiry(
  granted: Lease,
  answer: { now?: number; windows: WindowStatus[] },
  sentAt: number,
): number {
  const minuteEnd = answer.windows.find((w) => w.name === "minute")?.resetAt;
  if (answer.now === undefined || minuteEnd === undefined) return granted.expiresAt;
  return Math.min(granted.expiresAt, sentAt + Math.max(0, minuteEnd - answer.now));
}

/**
 * A lease the object has just granted under policy `policyVersion` in `answer`, none of it used
 * yet, ending at `expiresAt` by this holder's clock (see localExpiry).
 */
function heldLease(
  granted: Lease,
  answer: { policyVersion: number; now?: number },
  expiresAt: number,
): HeldLease {
  return {
    id: granted.id,
    left: granted.permits,
    lastGrant: granted.permits,
    expiresAt,
    // An object of an earlier release (no `now`) grants short leases only.
    forTheMinute: grantedForTheMinute(granted.expiresAt, answer.now ?? granted.expiresAt),
    policyVersion: answer.policyVersion,
    used: 0,
    admissionIds: [],
  };
}

/** The first minute's start at or after `t`. */
const minuteStartFrom = (t: number): number => t + ((MINUTE_MS - (t % MINUTE_MS)) % MINUTE_MS);

/** What goes back to the object of a lease no longer used (taking its ids not reported yet). */
const returnOf = (lease: HeldLease): ReturnedLease => ({
  id: lease.id,
  unused: lease.left,
  used: lease.used,
  ...idsOf(lease.admissionIds.splice(0)),
});

/** The `admissionIds` field of a report: absent when there are none (an isolate's lease). */
const idsOf = (admissionIds: string[]): { admissionIds?: string[] } =>
  admissionIds.length > 0 ? { admissionIds } : {};

/** What an isolate had when it sent a renewal, to read the answer against. */
interface SentRenewal {
  /** The lease in use. */
  lease: HeldLease;
  /** Its permits not used yet. */
  holding: number;
  /** Admissions since the last contact. */
  admitted: number;
  /** That contact's windows. */
  windows: WindowStatus[];
  /** `#changes` then. */
  changes: number;
  /** When it was sent, by this holder's clock. */
  at: number;
}

/**
 * One holder's admissions for one key (an isolate's, or a location holder's). Decides from its
 * lease when it holds one, else calls the object, asking for a lease when the key has been busy
 * here; while the key stays busy it renews the lease ahead, in a call its requests do not wait
 * for (see `renewsNow`).
 *
 * Built from three parts: how busy the key is here (ArrivalRate, arrival-rate.ts), what its
 * responses show (ShownWindows, shown-windows.ts), and which call waits for which
 * (CallsInFlight, call-coordination.ts): a lease is asked for, renewed or handed back only while
 * no other call for the key is in flight from here, and requests decided one by one are sent
 * only while the holder has no unused permits. What that guarantees (min(N, R) of N
 * simultaneous requests on a key with room R, as without leases) is in docs/quotas.md,
 * "The machine" (its transitions are named there).
 */
export class LeaseHolder {
  #lease: HeldLease | null = null;
  /** Leases that may no longer be used, whose unused permits go back with the next calls. */
  #unreturned: ReturnedLease[] = [];
  /** This holder's calls to the key's object in flight, and who waits for whom. */
  readonly #calls = new CallsInFlight();
  /** Counts changes made in this isolate (dropLease, forgetRefusals) that an answer on its way predates. */
  #changes = 0;
  readonly #rate = new ArrivalRate();
  /** When the key's last request arrived here (null: none yet), and the gap before it. */
  #lastArrival: number | null = null;
  #gapMs = 0;
  /** What this holder's responses show of the key's windows. */
  readonly #windows = new ShownWindows();
  /** Refused, banned, or too close to the limit: no lease is asked for before this time. */
  #noLeaseUntil = 0;
  #refusal: SeenRefusal | null = null;
  /** Permits asked for even while the key is quiet (0: a quiet key asks for none). */
  readonly #stock: number;
  /**
   * How long the key's object makes this holder's leases live (quota/lease.ts: a location
   * holder's stock, or an isolate's own lease). Leases are sized for it, and a renewal not
   * answered within it is given up (its request's `waitUntil` may have been cut short): requests
   * stop waiting for it and ask the object themselves. Permits it may still have been granted
   * stay counted until their minute ends, like a lost isolate's.
   */
  readonly #leaseLifetimeMs: number;
  /** How long ahead of its expiry the lease in use is renewed (see `renewsNow`). */
  readonly #renewAheadMs: number;

  /**
   * `stock`: the permits to ask for whenever a lease is asked for or renewed, even for a quiet
   * key (a location holder's stock, see objects/quota-holder.ts); an isolate keeps none.
   */
  constructor({ stock = 0 }: { stock?: number } = {}) {
    this.#stock = stock;
    const timings = LEASE_TIMINGS[stock > 0 ? "stock" : "isolate"];
    this.#leaseLifetimeMs = timings.lifetimeMs;
    this.#renewAheadMs = timings.renewAheadMs;
  }

  /**
   * The permits to ask for now, on top of `holding`: the key's recent rate here, and with a stock,
   * what tops it up to the stock, at least one (a renewal of a stock that is full still extends
   * its expiry, and adds no more than the request that sent it used).
   */
  #wanted(now: number, holding = 0): number {
    const forRate = this.#rate.leaseWanted(now, this.#leaseLifetimeMs);
    return this.#stock > 0 ? Math.max(forRate, this.#stock - holding, 1) : forRate;
  }

  /**
   * A location holder's: the requests it expects for the rest of the minute at the key's last
   * gap here, to which the key's object sizes a stock for the minute while this is the key's only
   * holder (see minuteStockWanted); none for an isolate.
   */
  #minuteWant(now: number): { minuteWant?: number } {
    if (this.#stock <= 0) return {};
    return { minuteWant: minuteStockWanted(now, now - (now % MINUTE_MS) + MINUTE_MS, this.#gapMs) };
  }

  /**
   * The work an admission leaves on the lease, not waited for by its request: a renewal it
   * started, then the hand-back of the lease's unused permits at expiry (or of leases retired
   * meanwhile); null when there is none. Rejects with what a call rejects with.
   */
  upkeep(decided: HolderDecision, calls: GiveBackCall): Promise<void> | null {
    if (decided.renewal) return this.giveBackAfterRenewal(decided.renewal, calls);
    return decided.leaseGranted ? this.giveBackAtExpiry(calls) : null;
  }

  /**
   * Once a renewal or refill has settled: the lease's unused permits handed back at its expiry if
   * it brought one, else the retired leases' now. Rejects with what the renewal rejects with.
   */
  giveBackAfterRenewal(renewal: Promise<boolean>, calls: GiveBackCall): Promise<void> {
    return renewal.then((renewed) =>
      renewed ? this.giveBackAtExpiry(calls) : this.giveBackRetired(calls),
    );
  }

  /**
   * Decides one request; throws what the object's call throws. `admissionId` (a location holder's
   * request) is reported with the lease if the request is admitted from it.
   */
  async admit(
    policy: Policy,
    calls: LeaseCalls,
    admissionId: string | null = null,
  ): Promise<HolderDecision> {
    const arrived = clock.now();
    this.#rate.note(arrived);
    this.#gapMs = this.#lastArrival === null ? 0 : Math.max(0, arrived - this.#lastArrival);
    this.#lastArrival = arrived;
    for (;;) {
      const exclusive = this.#calls.exclusive;
      if (exclusive) {
        await exclusive.catch(() => undefined);
        continue;
      }
      const now = clock.now();
      const local = this.#admitFromLease(policy, now, admissionId);
      if (local) {
        const renewal = this.#renewIfDue(calls, now);
        return { decision: local, local: true, leaseGranted: false, renewal };
      }
      const renewal = this.#calls.renewal;
      if (renewal) {
        // The lease ran out before its renewal came back: wait for it rather than call.
        await renewal.catch(() => undefined);
        continue;
      }
      this.#retireLease(policy, now);
      const want = now < this.#noLeaseUntil ? 0 : this.#wanted(now);
      if ((want > 0 || this.#unreturned.length > 0) && this.#calls.plainInFlight === 0) {
        const returning = this.#unreturned.splice(0);
        return this.#exclusiveCall(calls, { want, returning, ...this.#minuteWant(now) });
      }
      if (want > 0) {
        // A busy key with requests decided one by one in flight (it was quiet, or had no lease
        // yet): wait for them rather than add one more, then ask for a lease. Without this, a
        // busy isolate whose calls overlap never sees none in flight and never takes a lease.
        // (Awaits a promise its own request made: a Worker may wait on another request's
        // promise, not settle one made by another request.)
        await this.#calls.firstPlain()?.catch(() => undefined);
        continue;
      }
      return this.#plainCall(calls);
    }
  }

  /**
   * Hands the lease granted last back GIVE_BACK_GRACE_MS after its expiry if it still has unused
   * permits and no request has handed it back since (meant for `waitUntil`). `sleep` waits that
   * long, in ms. A lease no longer in use by then (dropped by a change made here, or replaced)
   * goes back then with the other retired ones, with the requests it served: no request of the
   * key need follow for them to be billed as admitted rather than stranded.
   */
  async giveBackAtExpiry(
    calls: GiveBackCall,
    sleep: (ms: number) => Promise<void> = clock.sleep,
  ): Promise<void> {
    const lease = this.#lease;
    if (!lease) return this.giveBackRetired(calls);
    // A request after the expiry hands the lease back with its own call; only if none came
    // within GIVE_BACK_GRACE_MS does the lease go back in a call of its own. A renewal that
    // extends the lease pushes its expiry out, and schedules a give-back of its own. A stock for
    // the minute waits for the next minute's start too: the minute's refill (objects/quota-holder.ts)
    // hands it back, if the key was used here, with no call of its own.
    const due = lease.forTheMinute ? minuteStartFrom(lease.expiresAt) : lease.expiresAt;
    await sleep(Math.max(0, due + GIVE_BACK_GRACE_MS - clock.now()));
    if (this.#lease !== lease) return this.giveBackRetired(calls);
    // Only once the lease has really expired: before, a request of this isolate may still use it
    // (checked again after any call in flight, which may have renewed it).
    const expired = () => this.#lease === lease && clock.now() >= lease.expiresAt;
    if (!expired()) return;
    await this.#calls.leaseCallsSettled();
    if (expired()) await this.giveBackUnused(calls);
  }

  /**
   * Hands back every unused permit now (the lease's, and a retired lease's not yet handed back).
   * Waits for a lease call in flight; skipped while requests decided one by one are in flight
   * (the isolate holds no unused permits then).
   */
  async giveBackUnused(calls: GiveBackCall): Promise<void> {
    await this.#calls.leaseCallsSettled();
    if (this.#calls.plainInFlight) return;
    if (this.#lease) {
      this.#keepToReturn(returnOf(this.#lease));
      this.#lease = null;
    }
    await this.giveBackRetired(calls);
  }

  /**
   * Hands back the unused permits of leases no longer in use (dropped, expired, or answered by
   * a renewal after this isolate stopped using them), leaving a live lease alone.
   */
  async giveBackRetired(calls: GiveBackCall): Promise<void> {
    await this.#calls.leaseCallsSettled();
    const returning = this.#unreturned.splice(0);
    if (returning.length === 0) return;
    await this.#calls.exclusively(
      Promise.all(
        returning.map((returned) =>
          calls.giveBack(returned).catch(() => {
            this.#keepToReturn(returned); // the next call hands it back instead
          }),
        ),
      ),
    );
  }

  /**
   * Stops admitting from the lease (a plan change or revocation made in this isolate): the next
   * request asks the object, which hands back the lease's unused permits first.
   */
  dropLease(): void {
    if (this.#lease) this.#keepToReturn(returnOf(this.#lease));
    this.#lease = null;
    this.#noLeaseUntil = 0;
    this.#changes++;
  }

  /**
   * Stops admitting from the lease and gives every unused permit (the lease's, and those waiting
   * to go back, with the requests admitted from them) to the caller, to hand back in a call of its
   * own (a location holder, as an isolate there takes a lease: see QuotaHolder.admitForIsolate).
   * A call of this holder's in flight that brings a lease finds it changed and hands it back.
   */
  surrender(): ReturnedLease[] {
    if (this.#lease) this.#keepToReturn(returnOf(this.#lease));
    this.#lease = null;
    this.#changes++;
    return this.#unreturned.splice(0);
  }

  /** Keeps `returned` (surrendered, and not handed back) to go back with a later call. */
  returnLater(returned: readonly ReturnedLease[]): void {
    for (const r of returned) this.#keepToReturn(r);
  }

  /** Forgets refusals seen here (after an unban or a plan change made in this isolate). */
  forgetRefusals(): void {
    this.#refusal = null;
    this.#noLeaseUntil = 0;
    this.#changes++;
  }

  /**
   * Both of the above: the key's next request asks the object (after a change to the key made
   * or learnt here, or as a location holder hands its stock back before a usage read).
   */
  dropLeaseAndRefusals(): void {
    this.dropLease();
    this.forgetRefusals();
  }

  /** The last refusal the object gave this isolate, while it lasts. */
  refusal(now: number): SeenRefusal | null {
    return this.#refusal && this.#refusal.retryAt > now ? this.#refusal : null;
  }

  /** Unused permits this isolate holds (in a live lease or waiting to go back). */
  get unusedPermits(): number {
    return (this.#lease?.left ?? 0) + this.#unreturned.reduce((n, r) => n + r.unused, 0);
  }

  #admitFromLease(policy: Policy, now: number, admissionId: string | null): KeyDecision | null {
    const lease = this.#lease;
    if (!lease || !this.#usable(lease, policy, now)) return null;
    lease.left--;
    lease.used++;
    if (admissionId !== null) lease.admissionIds.push(admissionId);
    return this.#windows.show({
      outcome: "allowed",
      windows: this.#windows.admitLocally(),
      now,
      policyVersion: lease.policyVersion,
    });
  }

  /**
   * Whether a request of `policy` may be admitted from `lease`: only under the version of the key
   * it was granted under. A request on an older copy of the key (another secret's record, not yet
   * read again) goes to the key's object, which tells it its copy is stale, and leaves the lease
   * alone; a newer one ends it (see `#leaseOver`).
   */
  #usable(lease: HeldLease, policy: Policy, now: number): boolean {
    return !this.#leaseOver(lease, policy, now) && policy.version === lease.policyVersion;
  }

  /** Used up, expired, or granted under an older policy than `policy` (this isolate re-read the key). */
  #leaseOver(lease: HeldLease, policy: Policy, now: number): boolean {
    return lease.left <= 0 || now >= lease.expiresAt || policy.version > lease.policyVersion;
  }

  #retireLease(policy: Policy, now: number): void {
    const lease = this.#lease;
    if (!lease || !this.#leaseOver(lease, policy, now)) return;
    this.#keepToReturn(returnOf(lease));
    this.#lease = null;
  }

  /**
   * Notes a lease's unused permits (and the requests admitted from it) to hand back, one entry
   * per lease: credited once. A used-up lease goes back too: until it does, the object counts it
   * as holding permits (see heldBound in quota/lease.ts), and the usage history does not count
   * its last requests as served.
   */
  #keepToReturn({ id, unused, used = 0, admissionIds = [] }: ReturnedLease): void {
    if (unused < 0) return;
    const known = this.#unreturned.find((r) => r.id === id);
    if (!known) this.#unreturned.push({ id, unused, used, ...idsOf(admissionIds) });
    else {
      known.unused += unused;
      known.used = Math.max(known.used ?? 0, used);
      Object.assign(known, idsOf([...(known.admissionIds ?? []), ...admissionIds]));
    }
  }

  /**
   * Starts renewing the lease in use when it is due (see `renewsNow`), if the key is still busy
   * here and nothing else is asking the object for this isolate. Requests go on admitting from
   * the lease meanwhile. Returns the renewal, which settles once its answer is applied.
   */
  #renewIfDue(calls: LeaseCalls, now: number): Promise<boolean> | null {
    const lease = this.#lease;
    const renew = calls.renew;
    if (!renew || !lease || !this.#calls.idle) return null;
    if (now < this.#noLeaseUntil) return null;
    const minuteEnd = this.#windows.minuteEnd;
    const renewOptions = { aheadMs: this.#renewAheadMs, stock: this.#stock, gapMs: this.#gapMs };
    if (!renewsNow(lease, minuteEnd, now, renewOptions)) return null;
    const want = this.#wanted(now, lease.left);
    if (want <= 0) return null;
    const sent: SentRenewal = {
      lease,
      holding: lease.left,
      admitted: this.#windows.admittedSinceContact,
      windows: this.#windows.atContact,
      changes: this.#changes,
      at: now,
    };
    const admissionIds = lease.admissionIds.splice(0);
    return this.#sendRenewal(
      renew,
      {
        leaseId: lease.id,
        want,
        holding: sent.holding,
        used: lease.used,
        ...idsOf(admissionIds),
        ...this.#minuteWant(now),
      },
      (answer) => this.#renewed(answer, sent),
      () => this.#reportAgain(lease, admissionIds),
    );
  }

  /**
   * Sends `request` (a renewal, or a refill) to the object, with the leases waiting to be handed
   * back, as this holder's one renewal in flight; `apply` applies the answer. When the call fails
   * (or takes longer than a lease's lifetime), the leases it carried wait to be handed back again,
   * and `failed` keeps what else it reported.
   */
  #sendRenewal(
    renew: NonNullable<LeaseCalls["renew"]>,
    request: Omit<RenewalRequest, "returning">,
    apply: (answer: Renewal) => boolean,
    failed: () => void = () => undefined,
  ): Promise<boolean> {
    const returning = this.#unreturned.splice(0);
    return this.#calls.asRenewal(
      withDeadline(
        // A call that throws instead of rejecting must not fail the request that sent it.
        Promise.resolve().then(() =>
          renew({ ...request, returning, renewalId: crypto.randomUUID() }),
        ),
        this.#leaseLifetimeMs,
      ).then(apply, (err: unknown) => {
        for (const r of returning) this.#keepToReturn(r);
        failed();
        throw err;
      }),
    );
  }

  /**
   * Keeps the admission ids a failed renewal of `lease` carried, to report again: with the lease
   * while it is in use, else with its hand-back (by what it served, so whichever of its entries
   * arrives first settles it right; a later one settles nothing again, and still reports ids).
   */
  #reportAgain(lease: HeldLease, admissionIds: string[]): void {
    if (admissionIds.length === 0) return;
    if (this.#lease === lease) lease.admissionIds.unshift(...admissionIds);
    else this.#keepToReturn({ id: lease.id, unused: 0, used: lease.used, admissionIds });
  }

  /**
   * Asks for a fresh lease of the stock with no request to decide, when the holder has no usable
   * lease and nothing else is asking the object (a location holder's refill once a new minute
   * began: the minute's first requests then find stock). Requests arriving meanwhile wait for
   * it, as for a renewal. Returns the refill, settling with whether it brought a lease, or null
   * when none was sent.
   */
  refill(policy: Policy, calls: LeaseCalls): Promise<boolean> | null {
    const renew = calls.renew;
    const now = clock.now();
    if (!renew || this.#stock <= 0 || !this.#calls.idle) return null;
    if (now < this.#noLeaseUntil) return null;
    if (this.#lease && !this.#leaseOver(this.#lease, policy, now)) return null;
    this.#retireLease(policy, now);
    const changes = this.#changes;
    const request = { leaseId: "", want: this.#stock, holding: 0, ...this.#minuteWant(now) };
    return this.#sendRenewal(renew, request, (answer) =>
      this.#refilled(answer, policy, changes, now),
    );
  }

  /** Applies a refill's answer (see `refill`); permits it cannot use go to the ones to hand back. */
  #refilled(answer: Renewal, policy: Policy, changes: number, sentAt: number): boolean {
    const { granted } = answer;
    this.#windows.contact(answer.windows);
    const changed = this.#changes !== changes;
    if (answer.revoked || answer.policyVersion > policy.version || changed || this.#lease) {
      if (granted) this.#keepToReturn({ id: granted.id, unused: granted.permits });
      return false;
    }
    if (!granted) {
      this.#noLeaseUntilMinuteEnds(answer.windows);
      return false;
    }
    this.#lease = heldLease(granted, answer, localExpiry(granted, answer, sentAt));
    return true;
  }

  /**
   * Applies a renewal's answer, given what the isolate had when it sent it. Returns whether the
   * isolate now holds a renewed lease; permits it cannot use go to the ones to hand back.
   */
  #renewed(answer: Renewal, sent: SentRenewal): boolean {
    const { lease } = sent;
    const { granted } = answer;
    this.#windows.renewalAnswered(answer.windows, sent);
    const inUse = this.#lease === lease;
    if (answer.revoked || answer.policyVersion > lease.policyVersion) {
      // Revoked, or the plan changed: stop admitting from leases; the next request asks.
      if (inUse) this.dropLease();
      if (granted) this.#keepToReturn({ id: granted.id, unused: granted.permits });
      return false;
    }
    if (!granted) {
      // Refused, banned or near the limit: once this lease is used, one call per request
      // (unless this isolate changed the key's plan or lifted its ban since it asked).
      if (this.#changes === sent.changes) this.#noLeaseUntilMinuteEnds(answer.windows);
      return false;
    }
    if (inUse && granted.id === lease.id) {
      lease.left += granted.permits;
      lease.lastGrant = granted.permits;
      lease.expiresAt = localExpiry(granted, answer, sent.at);
      lease.forTheMinute = grantedForTheMinute(granted.expiresAt, answer.now ?? granted.expiresAt);
      return true;
    }
    if (!inUse) {
      // Dropped, retired or surrendered while the renewal was on its way: its permits go back
      // too. An extension of that lease goes back with what the lease served: its own hand-back
      // may have left already (surrendered to an isolate's call), and whichever of the two
      // reaches the key's object first settles the lease.
      const used = granted.id === lease.id ? lease.used : 0;
      this.#keepToReturn({ id: granted.id, unused: granted.permits, used });
      return false;
    }
    // A new lease (the one in use was of an earlier minute): the old one's rest goes back.
    this.#keepToReturn(returnOf(lease));
    this.#lease = heldLease(granted, answer, localExpiry(granted, answer, sent.at));
    return true;
  }

  /** No lease is asked for before the minute window in `windows` ends (none: no change). */
  #noLeaseUntilMinuteEnds(windows: WindowStatus[]): void {
    const minute = windows.find((w) => w.name === "minute");
    this.#noLeaseUntil = Math.max(this.#noLeaseUntil, minute?.resetAt ?? 0);
  }

  #exclusiveCall(calls: LeaseCalls, request: LeaseRequest): Promise<HolderDecision> {
    const changes = this.#changes;
    const sentAt = clock.now();
    return this.#calls.exclusively(
      calls.admit(request).then(
        (admission) => this.#contact(admission, request.want, changes, sentAt),
        (err: unknown) => {
          // The object may not have taken it back; a repeated return is credited once.
          for (const r of request.returning) this.#keepToReturn(r);
          throw err;
        },
      ),
    );
  }

  #plainCall(calls: LeaseCalls): Promise<HolderDecision> {
    return this.#calls.plain(() =>
      calls
        .admit({ want: 0, returning: [] })
        .then((admission) => this.#contact(admission, 0, this.#changes, 0)),
    );
  }

  /**
   * Applies the object's answer to a call sent when `#changes` was `changes`, at `sentAt` (by
   * this holder's clock; a lease it grants ends by it, see `localExpiry`). A lease it grants
   * is not used when the key changed meanwhile (a plan change or revocation pushed while the
   * answer was on its way): requests that arrive after the change must not be admitted under
   * the old policy, so its permits go back instead.
   */
  #contact(admission: Admission, wanted: number, changes: number, sentAt: number): HolderDecision {
    const { lease, ...decision } = admission;
    // Not decided (the caller's copy of the key is older than the object's): nothing counted,
    // nothing to show or remember; the caller reads the key again and asks again.
    if (decision.outcome === "stale") {
      if (lease) this.#keepToReturn({ id: lease.id, unused: lease.permits });
      return { decision, local: false, leaseGranted: false, renewal: null };
    }
    if (decision.outcome === "revoked") {
      this.#lease = null;
    } else if (decision.outcome !== "allowed") {
      this.#refusal = { outcome: decision.outcome, retryAt: decision.retryAt };
      this.#noLeaseUntil = Math.max(this.#noLeaseUntil, decision.retryAt);
    } else if (wanted > 0 && !lease) {
      // Too close to the limit for a lease: one call per request until the minute is over.
      this.#noLeaseUntilMinuteEnds(decision.windows);
    }
    const changed = this.#changes !== changes;
    if (lease && changed) this.#keepToReturn({ id: lease.id, unused: lease.permits });
    else if (lease) this.#lease = heldLease(lease, decision, localExpiry(lease, decision, sentAt));
    this.#windows.contact(decision.windows);
    const leaseGranted = lease !== null && !changed;
    return { decision: this.#windows.show(decision), local: false, leaseGranted, renewal: null };
  }
}
