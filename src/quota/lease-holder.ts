import { clock, MINUTE_MS, minuteEndOf } from "../lib/clock";
import { ArrivalRate } from "./arrival-rate";
import { withDeadline } from "./call-coordination";
import {
  ISOLATE_LEASE_MS,
  MINUTE_TAIL_MS,
  minuteStockWanted,
  RenewAhead,
  renewsNow,
  STOCK_LEASE_MS,
  STOCK_RENEW_AHEAD_MS,
} from "./lease";
import { type LeaseCalls, LeaseHandBacks } from "./lease-hand-backs";

export type { GiveBackCall, LeaseCalls } from "./lease-hand-backs";

import { type HolderDecision, idsOf, type SentRenewal } from "./lease-in-hand";
import {
  type Admission,
  endsLeases,
  type LeaseRequest,
  type Renewal,
  type RenewalRequest,
  type SharedStock,
} from "./lease-messages";
import { windowsAfterLocalAdmissions } from "./shown-windows";
import { standingMinutesWanted, standingWanted } from "./standing";
import type { StandingMemory } from "./standing-stock";
import type { Policy } from "./windows";

/**
 * One holder's admissions for one key: from its lease, else by a call asking for one once the key
 * is busy here, renewed ahead (`renewsNow`). Its transitions: docs/quotas.md, "The machine".
 */
export class LeaseHolder extends LeaseHandBacks {
  readonly #rate = new ArrivalRate();
  readonly #stock: number;
  /**
   * Leases are sized for this long, and a renewal not answered within it is given up (the
   * request's `waitUntil` that carried it may have been cut short): requests then ask themselves.
   */
  readonly #leaseLifetimeMs: number;
  readonly #renewAhead: RenewAhead;
  /** The minute end whose turn a renewal asked a new lease for (see `#renewAtTheTurn`). */
  #turnOf = 0;

  /** `stock`: the permits a location holder asks for even for a quiet key; an isolate: 0. */
  constructor({ stock = 0 }: { stock?: number } = {}) {
    super();
    this.#stock = stock;
    this.#leaseLifetimeMs = stock > 0 ? STOCK_LEASE_MS : ISOLATE_LEASE_MS;
    this.#renewAhead = new RenewAhead(stock > 0 ? STOCK_RENEW_AHEAD_MS : null);
  }

  /** On top of `holding`: the key's rate here; with a stock, at least its top-up, and one. */
  #wanted(now: number, holding = 0): number {
    const forRate = this.#rate.leaseWanted(now, this.#leaseLifetimeMs);
    return this.#stock > 0 ? Math.max(forRate, this.#stock - holding, 1) : forRate;
  }

  /** A location holder's asks for the rest of the minute (minuteStockWanted) and the next ones. */
  #minuteWant(now: number): { minuteWant?: number; standing?: number; standingMinutes?: number } {
    if (this.#stock <= 0) return {};
    const minuteWant = minuteStockWanted(now, minuteEndOf(now), this.#rate.spacingMs);
    return { minuteWant, ...this.#standingWant(now) };
  }

  /**
   * A location holder's standing permits per minute to come (sized at sparseGap), once those held
   * would not cover the key's next request here (its longest recent gap, at least a minute on).
   */
  #standingWant(now: number): { standing?: number; standingMinutes?: number } {
    const gapMs = this.#rate.sparseGap(now);
    const standing = this.#stock > 0 ? standingWanted(gapMs) : 0;
    const nextExpected = now + Math.max(gapMs, this.#rate.longestGapMs, MINUTE_MS);
    if (standing <= 0 || this.standing.coveredUntil > nextExpected) return {};
    return { standing, standingMinutes: standingMinutesWanted(gapMs) };
  }

  /** What a location holder keeps across an eviction (see StandingMemory). */
  standingMemory(): StandingMemory {
    // The stock in memory is lost with an eviction, counted as used (stranded): no room then.
    const kept = new Set(this.standing.held().map((h) => h.id));
    const lost =
      (this.lease?.left ?? 0) +
      this.unreturned.filter((r) => !kept.has(r.id)).reduce((n, r) => n + r.unused, 0);
    return {
      standing: this.standing.held(),
      lastArrival: this.#rate.lastArrival,
      gapMs: this.#rate.gapMs,
      windows: windowsAfterLocalAdmissions(
        this.windows.atContact,
        this.windows.admittedSinceContact + lost,
      ),
    };
  }

  /** Holds what `memory` kept, each permit usable `marginMs` less at both ends of its minute. */
  restoreStanding(memory: StandingMemory, marginMs: number): void {
    this.standing.restore(memory.standing, marginMs);
    this.returnLater(this.standing.reportsPending());
    this.#rate.restore(memory.lastArrival, memory.gapMs);
    if (memory.windows) this.windows.contact(memory.windows);
  }

  onStandingChange(changed: () => void): void {
    this.standing.onChange = changed;
  }

  /**
   * Whether a stock refilled at `turn` is likely used in its minute (seen once: yes): not when the
   * key's next request (at its longest recent gap) is due after it, or overdue by more than that
   * gap; the stock would wait a minute to go back, stranded if the holder is evicted before.
   */
  refillDueAt(turn: number): boolean {
    const { lastArrival, longestGapMs: gapMs } = this.#rate;
    if (lastArrival === null || gapMs === 0) return true;
    return lastArrival + gapMs < turn + MINUTE_MS && lastArrival + 2 * gapMs >= turn;
  }

  /** When the last standing permit not reported ends (0: none). */
  get standingHeldUntil(): number {
    return this.standing.heldUntil;
  }

  /** When the last standing permit held ends (0: none). */
  get standingUntil(): number {
    return this.standing.lastUntil;
  }

  /** Decides one request; throws what the object's call throws. */
  async admit(
    policy: Policy,
    calls: LeaseCalls,
    admissionId: string | null = null,
  ): Promise<HolderDecision> {
    const arrived = clock.now();
    this.#rate.note(arrived);
    let turn: Promise<boolean> | null = null;
    for (;;) {
      const exclusive = this.calls.exclusive;
      if (exclusive) {
        await exclusive.catch(() => undefined);
        continue;
      }
      const now = clock.now();
      const local = this.admitFromLease(policy, now, admissionId);
      if (local) {
        const renewal =
          this.#renewIfDue(calls, now) ?? this.#askStandingIfDue(policy, calls, now) ?? turn;
        return { decision: local, local: true, leaseGranted: false, renewal };
      }
      const renewal = this.calls.renewal;
      if (renewal) {
        // The lease ran out before its renewal came back: wait for it rather than call.
        await renewal.catch(() => undefined);
        continue;
      }
      if (!turn) {
        turn = this.#renewAtTheTurn(policy, calls, now);
        if (turn) continue; // waited for as a renewal in flight
      }
      this.retireLease(policy, now);
      const want = now < this.noLeaseUntil ? 0 : this.#wanted(now);
      if ((want > 0 || this.unreturned.length > 0) && this.calls.plainInFlight === 0) {
        this.reportStanding(now);
        const returning = this.unreturned.splice(0);
        return this.#exclusiveCall(calls, { want, returning, ...this.#minuteWant(now) });
      }
      if (want > 0) {
        // A busy key with requests decided one by one in flight: wait for them, then ask for a
        // lease. Else a busy isolate whose calls overlap never sees none in flight.
        await this.calls.firstPlain()?.catch(() => undefined);
        continue;
      }
      return this.#plainCall(calls);
    }
  }

  /**
   * An isolate's lease that ended with its minute, the key still busy: once per minute, a refill
   * brings the next minute's lease and hands the old one back (requests wait as for a renewal).
   */
  #renewAtTheTurn(policy: Policy, calls: LeaseCalls, now: number): Promise<boolean> | null {
    const { lease } = this;
    const minuteEnd = this.windows.minuteEnd;
    const ended = lease && now >= lease.expiresAt && lease.expiresAt >= minuteEnd - MINUTE_TAIL_MS;
    if (this.#stock > 0 || !ended || this.#turnOf === minuteEnd) return null;
    const turn = this.#refill(policy, calls, now, this.#wanted(now));
    if (turn) this.#turnOf = minuteEnd;
    return turn;
  }

  /** Asks for standing permits in the background when `#standingWant` says so. */
  #askStandingIfDue(policy: Policy, calls: LeaseCalls, now: number): Promise<boolean> | null {
    const renew = calls.renew;
    if (!renew || !this.calls.idle || now < this.noLeaseUntil) return null;
    const wanted = this.#standingWant(now);
    if (!wanted.standing) return null;
    // The minute's stock goes back with it when the key's next request is due after the minute.
    if (this.lease && now + this.#rate.gapMs >= minuteEndOf(now)) this.putLeaseAside();
    const changes = this.changes;
    const request = { leaseId: "", want: 0, holding: 0, ...wanted };
    return this.#sendRenewal(renew, request, (answer) => {
      if (!endsLeases(answer, policy.version))
        return this.keepStanding(answer, answer.policyVersion, now, changes);
      this.dropLeaseAndRefusals();
      return this.keepNothing(answer);
    });
  }

  /** Starts renewing the lease in use when due (`renewsNow`) and no other call is in flight. */
  #renewIfDue(calls: LeaseCalls, now: number): Promise<boolean> | null {
    const lease = this.lease;
    const renew = calls.renew;
    if (!renew || !lease || !this.calls.idle || now < this.noLeaseUntil) return null;
    const renewOptions = {
      aheadMs: this.#renewAhead.ms,
      stock: this.#stock,
      gapMs: this.#rate.gapMs,
    };
    if (!renewsNow(lease, this.windows.minuteEnd, now, renewOptions)) return null;
    const want = this.#wanted(now, lease.left);
    if (want <= 0) return null;
    const sent: SentRenewal = {
      lease,
      holding: lease.left,
      admitted: this.windows.admittedSinceContact,
      windows: this.windows.atContact,
      changes: this.changes,
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
      (answer) => {
        this.#renewAhead.answered(clock.now() - sent.at);
        return this.renewed(answer, sent);
      },
      () => this.reportAgain(lease, admissionIds),
    );
  }

  /**
   * Sends `request` (a renewal, or a refill) with the leases waiting to go back, as the one renewal
   * in flight. Failed or past the lease's life, they wait again; `failed` keeps what else it sent.
   */
  #sendRenewal(
    renew: NonNullable<LeaseCalls["renew"]>,
    request: Omit<RenewalRequest, "returning">,
    apply: (answer: Renewal) => boolean,
    failed: () => void = () => undefined,
  ): Promise<boolean> {
    this.reportStanding(clock.now());
    const returning = this.unreturned.splice(0);
    const call = withDeadline(
      // A call that throws instead of rejecting must not fail the request that sent it.
      Promise.resolve().then(() =>
        renew({ ...request, returning, renewalId: crypto.randomUUID() }),
      ),
      this.#leaseLifetimeMs,
    );
    return this.calls.asRenewal(this.settle(call, returning, apply, failed));
  }

  /**
   * A location holder's refill: a fresh stock with no request to decide, so that the minute's first
   * requests find stock (waiting for it as for a renewal). Whether it brought a lease (null: none).
   */
  refill(policy: Policy, calls: LeaseCalls): Promise<boolean> | null {
    const now = clock.now();
    if (this.#stock <= 0) return null;
    // Standing permits of this minute sized for the requests expected in it: no call. (A second
    // in: they are usable from the minute's start by the object's clock, a one-way trip ahead.)
    const sizedFor = standingWanted(this.#rate.sparseGap(now));
    if (sizedFor > 0 && this.standing.usableAt(now + 1_000) >= sizedFor) return null;
    return this.#refill(policy, calls, now, this.#stock);
  }

  /** A refill of `want` permits, the lease in use over and handed back with it; null if none. */
  #refill(policy: Policy, calls: LeaseCalls, now: number, want: number) {
    const renew = calls.renew;
    if (!renew || !this.calls.idle || want <= 0 || now < this.noLeaseUntil) return null;
    if (this.lease && !this.leaseOver(this.lease, policy, now)) return null;
    this.retireLease(policy, now);
    const changes = this.changes;
    const request = { leaseId: "", want, holding: 0, ...this.#minuteWant(now) };
    return this.#sendRenewal(renew, request, (answer) =>
      this.refilled(answer, policy, changes, now),
    );
  }

  /**
   * The key's object shares heldBound with another location (QuotaHolder.restock): a stock larger
   * than this holder's own size goes back with a refill; a holder with none asks for one.
   */
  restock(policy: Policy, calls: LeaseCalls): Promise<boolean> | null {
    const now = clock.now();
    if (this.#stock <= 0 || !this.calls.idle || this.refusal(now)) return null;
    const lease = this.lease;
    if (lease && !this.leaseOver(lease, policy, now) && lease.left <= this.#stock) return null;
    // Refused a stock while others held the bound: no refusal, so it may ask again now.
    const noLeaseUntil = this.noLeaseUntil;
    this.noLeaseUntil = 0;
    this.putLeaseAside();
    const refill = this.refill(policy, calls);
    if (!refill) this.noLeaseUntil = noLeaseUntil;
    return refill;
  }

  /** Cuts a location holder's stock to its size to share heldBound: what it gave up, or null. */
  share(policy: Policy): SharedStock | null {
    const lease = this.lease;
    if (!lease || !this.calls.idle || this.leaseOver(lease, policy, clock.now())) return null;
    const cut = lease.left - this.#stock;
    if (this.#stock <= 0 || cut <= 0) return null;
    const seen = lease.used + lease.left;
    lease.left -= cut;
    return { id: lease.id, seen, cut };
  }

  #exclusiveCall(calls: LeaseCalls, request: LeaseRequest): Promise<HolderDecision> {
    const changes = this.changes;
    const sentAt = clock.now();
    const contact = (admission: Admission) =>
      this.contact(admission, request.want, changes, sentAt);
    return this.calls.exclusively(this.settle(calls.admit(request), request.returning, contact));
  }

  #plainCall(calls: LeaseCalls): Promise<HolderDecision> {
    return this.calls.plain(() =>
      calls
        .admit({ want: 0, returning: [] })
        .then((admission) => this.contact(admission, 0, this.changes, 0)),
    );
  }
}
