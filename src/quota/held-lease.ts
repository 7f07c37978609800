import { clock } from "../lib/clock";
import { grantedForTheMinute } from "./lease";
import {
  type HeldLease,
  type HolderDecision,
  heldLease,
  idsOf,
  localExpiry,
  returnOf,
  type SentRenewal,
} from "./lease-in-hand";
import type { Admission, Renewal, ReturnedLease, StandingPermit } from "./lease-messages";
import { endsLeases } from "./lease-messages";
import { ShownWindows } from "./shown-windows";
import { StandingStock } from "./standing-stock";
import type { KeyDecision, Policy, SeenRefusal, WindowStatus } from "./windows";

const allowed = (windows: WindowStatus[], now: number, policyVersion: number): KeyDecision => ({
  outcome: "allowed",
  windows,
  now,
  policyVersion,
});

/** What one holder holds of one key, and what each answer does to it (calls: LeaseHolder). */
export class HeldLeases {
  protected lease: HeldLease | null = null;
  /** Leases that may no longer be used, whose unused permits go back with the next calls. */
  protected readonly unreturned: ReturnedLease[] = [];
  /** Counts changes made here (dropLease, forgetRefusals): an answer on its way predates them. */
  protected changes = 0;
  protected readonly windows = new ShownWindows();
  /** A location holder's standing permits for the minutes to come (quota/standing.ts). */
  protected readonly standing = new StandingStock();
  /** Refused, banned, or too close to the limit: no lease is asked for before this time. */
  protected noLeaseUntil = 0;
  /** Standing permits of an older policy wait to go back (`retireStandingOlderThan`): now. */
  protected supersededWaiting = false;
  /** Others are asked to share the bound with this location holder: it refills now. */
  sharingAsked = false;
  #refusal: SeenRefusal | null = null;

  /** Stops admitting from the lease (a change made here): the next request asks the object. */
  dropLease(): void {
    this.putLeaseAside();
    this.reportStanding(0, { all: true });
    this.noLeaseUntil = 0;
    this.changes++;
  }

  /** Stops admitting from the lease: its permits go back in the caller's call (admitForIsolate). */
  surrender(): ReturnedLease[] {
    this.putLeaseAside();
    this.reportStanding(0, { all: true });
    this.changes++;
    return this.unreturned.splice(0);
  }

  /** Keeps `returned` (surrendered, and not handed back) to go back with a later call. */
  returnLater(returned: readonly ReturnedLease[]): void {
    for (const r of returned) this.keepToReturn(r);
  }

  /** Forgets refusals seen here (after an unban or a plan change made in this isolate). */
  forgetRefusals(): void {
    this.#refusal = null;
    this.noLeaseUntil = 0;
    this.changes++;
  }

  /** Both of the above: the key's next request asks the object. */
  dropLeaseAndRefusals(): void {
    this.dropLease();
    this.forgetRefusals();
  }

  /** The last refusal the object gave this holder, while it lasts. */
  refusal(now: number): SeenRefusal | null {
    return this.#refusal && this.#refusal.retryAt > now ? this.#refusal : null;
  }

  /** Unused permits held (in a live lease, waiting to go back, or standing). */
  get unusedPermits(): number {
    const returning = this.unreturned.reduce((n, r) => n + r.unused, 0);
    return (this.lease?.left ?? 0) + returning + this.standing.unused;
  }

  protected admitFromLease(
    policy: Policy,
    now: number,
    admissionId: string | null,
  ): KeyDecision | null {
    this.retireStandingOlderThan(policy.version);
    const repeated =
      admissionId === null ? null : this.#answeredFromStanding(policy, now, admissionId);
    if (repeated) return repeated;
    const lease = this.lease;
    if (!lease || !this.#usable(lease, policy, now))
      return this.#admitStanding(policy, now, admissionId);
    lease.left--;
    lease.used++;
    if (admissionId !== null) lease.admissionIds.push(admissionId);
    return this.windows.show(allowed(this.windows.admitLocally(), now, lease.policyVersion));
  }

  #admitStanding(policy: Policy, now: number, admissionId: string | null): KeyDecision | null {
    // No windows to show (kept across an eviction without them): the key's object decides. Nor
    // while a refusal it gave lasts (a ban whose push was lost): it forwards until it ends.
    if (this.windows.atContact.length === 0 || this.refusal(now)) return null;
    const windows = this.standing.take(
      policy.version,
      now,
      admissionId,
      this.windows.atContact,
      (taken) => {
        // The day goes down by one, as for any request admitted here (its permit is room at contact).
        const local = this.windows.admitLocally();
        const shown = taken.map(
          (w) => local.find((l) => l.name === w.name && l.resetAt === w.resetAt) ?? w,
        );
        return this.windows.show(allowed(shown, now, policy.version)).windows;
      },
    );
    return windows && allowed(windows, now, policy.version);
  }

  /** Asked again (answer lost, holder evicted): the decision its standing permit gave, or null. */
  #answeredFromStanding(policy: Policy, now: number, admissionId: string): KeyDecision | null {
    const { version } = policy;
    const windows = this.standing.answeredBefore(admissionId, version, this.windows.atContact);
    return windows && allowed(windows, now, version);
  }

  /** Moves the standing permits done with at `now` (or `all`) to the leases to hand back. */
  protected reportStanding(now: number, options: { all?: boolean } = {}): void {
    for (const r of this.standing.reports(now, options)) this.keepToReturn(r);
  }

  /** Moves the standing permits of a policy older than `version` (a push missed) to hand back. */
  protected retireStandingOlderThan(version: number): void {
    const superseded = this.standing.reportsOlderThan(version);
    for (const r of superseded) this.keepToReturn(r);
    if (superseded.length > 0) this.supersededWaiting = true;
  }

  /** Keeps the standing permits granted unless changed since `changesWhenSent`; whether it did. */
  protected keepStanding(
    answer: { standing?: StandingPermit[]; now?: number },
    policyVersion: number,
    sentAt: number,
    changesWhenSent: number,
  ): boolean {
    if (this.changes !== changesWhenSent) {
      this.returnStandingGranted(answer, policyVersion);
      return false;
    }
    this.retireStandingOlderThan(policyVersion);
    const granted = answer.standing ?? [];
    if (granted.length === 0) return false;
    this.standing.add(granted, policyVersion, answer.now, sentAt, clock.now());
    return true;
  }

  /** Keeps none of the standing permits an answer granted: they go back unused with the next call. */
  protected returnStandingGranted(
    answer: { standing?: StandingPermit[] },
    policyVersion: number,
  ): void {
    this.retireStandingOlderThan(policyVersion);
    for (const g of answer.standing ?? [])
      this.keepToReturn({ id: g.id, unused: g.permits, used: 0 });
  }

  /** Only under its own version: an older copy of the key goes to the object, which says stale. */
  #usable(lease: HeldLease, policy: Policy, now: number): boolean {
    return !this.leaseOver(lease, policy, now) && policy.version === lease.policyVersion;
  }

  /** Used up, expired, or granted under an older policy than `policy` (the key was read again). */
  protected leaseOver(lease: HeldLease, policy: Policy, now: number): boolean {
    return lease.left <= 0 || now >= lease.expiresAt || policy.version > lease.policyVersion;
  }

  protected retireLease(policy: Policy, now: number): void {
    if (this.lease && this.leaseOver(this.lease, policy, now)) this.putLeaseAside();
  }

  /** Stops using the lease in use: its unused permits, with the requests it served, go back (that
   * report returned; null: no lease in use). */
  protected putLeaseAside(): ReturnedLease | null {
    const report = this.lease && returnOf(this.lease);
    if (report) this.keepToReturn(report);
    this.lease = null;
    return report;
  }

  /**
   * Notes a lease's unused permits and what it served to hand back, one entry per lease; a used-up
   * one too: until then the object counts it in heldBound, and bills its last requests.
   */
  protected keepToReturn({ id, unused, used, admissionIds = [] }: ReturnedLease): void {
    if (unused < 0) return;
    const known = this.unreturned.find((r) => r.id === id);
    if (!known) this.unreturned.push({ id, unused, used, ...idsOf(admissionIds) });
    else {
      known.unused += unused;
      known.used = Math.max(known.used, used);
      Object.assign(known, idsOf([...(known.admissionIds ?? []), ...admissionIds]));
    }
  }

  /** Keeps the admission ids a failed renewal of `lease` carried to report again (or hand back). */
  protected reportAgain(lease: HeldLease, admissionIds: string[]): void {
    if (admissionIds.length === 0) return;
    if (this.lease === lease) lease.admissionIds.unshift(...admissionIds);
    else this.keepToReturn({ id: lease.id, unused: 0, used: lease.used, admissionIds });
  }

  /** Keeps nothing of `answer`: its lease and standing permits go back. */
  protected keepNothing(answer: Renewal): false {
    if (answer.granted)
      this.keepToReturn({ id: answer.granted.id, unused: answer.granted.permits, used: 0 });
    this.returnStandingGranted(answer, answer.policyVersion);
    return false;
  }

  /** Applies a refill's answer (see LeaseHolder.refill). */
  protected refilled(answer: Renewal, policy: Policy, changes: number, sentAt: number): boolean {
    const { granted } = answer;
    this.windows.contact(this.standing.withOwnRoom(answer.windows));
    if (endsLeases(answer, policy.version) || this.changes !== changes || this.lease)
      return this.keepNothing(answer);
    const standing = this.keepStanding(answer, answer.policyVersion, sentAt, changes);
    if (!granted) {
      this.noLeaseUntilMinuteEnds(answer.windows);
      return standing;
    }
    this.lease = heldLease(granted, answer, sentAt, { withStanding: standing });
    return true;
  }

  /** Applies a renewal's answer; returns whether the holder now holds a renewed lease. */
  protected renewed(answer: Renewal, sent: SentRenewal): boolean {
    const { lease } = sent;
    const { granted } = answer;
    this.windows.renewalAnswered(this.standing.withOwnRoom(answer.windows), sent);
    const inUse = this.lease === lease;
    if (endsLeases(answer, lease.policyVersion)) {
      if (inUse) this.dropLease();
      return this.keepNothing(answer);
    }
    this.keepStanding(answer, answer.policyVersion, sent.at, sent.changes);
    if (!granted) {
      // Once this lease is used, one call per request (unless the key changed here since).
      if (this.changes === sent.changes) this.noLeaseUntilMinuteEnds(answer.windows);
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
      // Put aside meanwhile: its permits go back too, an extension with what the lease served
      // (its own hand-back may have left already; whichever arrives first settles the lease).
      const used = granted.id === lease.id ? lease.used : 0;
      this.keepToReturn({ id: granted.id, unused: granted.permits, used });
      return false;
    }
    // A new lease (the one in use was of an earlier minute): the old one's rest goes back.
    this.keepToReturn(returnOf(lease));
    this.lease = heldLease(granted, answer, sent.at);
    return true;
  }

  protected noLeaseUntilMinuteEnds(windows: WindowStatus[]): void {
    const minute = windows.find((w) => w.name === "minute");
    this.noLeaseUntil = Math.max(this.noLeaseUntil, minute?.resetAt ?? 0);
  }

  /**
   * Applies the object's answer to a call sent at `sentAt` (this holder's clock) when
   * `this.changes` was `changes`. A lease granted after the key changed here goes back unused.
   */
  protected contact(
    admission: Admission,
    wanted: number,
    changes: number,
    sentAt: number,
  ): HolderDecision {
    // The standing permits granted are this holder's: the decision it passes on (to an isolate)
    // carries none, or the isolate would keep a copy and use or hand back the same permits.
    const { lease, standing: _standing, ...decision } = admission;
    // Not decided (the caller's copy of the key is stale): nothing counted, shown or remembered.
    if (decision.outcome === "stale") {
      this.retireStandingOlderThan(decision.policyVersion);
      if (lease) this.keepToReturn({ id: lease.id, unused: lease.permits, used: 0 });
      return { decision, local: false, leaseGranted: false, renewal: null };
    }
    if (decision.outcome === "revoked") {
      this.lease = null;
    } else if (decision.outcome !== "allowed") {
      this.#refusal = { outcome: decision.outcome, retryAt: decision.retryAt };
      this.noLeaseUntil = Math.max(this.noLeaseUntil, decision.retryAt);
    } else if (wanted > 0 && !lease) {
      // Others share the bound with it (it refills now), or too close to the limit for a lease:
      // one call per request until the minute is over.
      if (admission.sharing) this.sharingAsked = true;
      else this.noLeaseUntilMinuteEnds(decision.windows);
    }
    // Unused standing permits held here are room, as a lease's (the decision's windows count
    // those granted before, not those it grants).
    const windows = this.standing.withOwnRoom(decision.windows);
    const changed = this.changes !== changes;
    const standing = this.keepStanding(admission, decision.policyVersion, sentAt, changes);
    if (lease && changed) this.keepToReturn({ id: lease.id, unused: lease.permits, used: 0 });
    else if (lease) this.lease = heldLease(lease, decision, sentAt, { withStanding: standing });
    this.windows.contact(windows);
    const leaseGranted = lease !== null && !changed;
    const shown = this.windows.show({ ...decision, windows });
    return { decision: shown, local: false, leaseGranted, renewal: null };
  }
}
