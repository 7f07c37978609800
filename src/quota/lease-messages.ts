/**
 * What a lease holder (an isolate, or a location holder) and the key's QuotaLimiter send each
 * other: requests with leases asked for or handed back, renewals, and their answers.
 */
import type { KeyDecision, WindowStatus } from "./windows";

/** A lease's unused permits, handed back. Handing back the same lease twice credits it once. */
export interface ReturnedLease {
  id: string;
  unused: number;
  /**
   * Requests admitted from the lease: what the usage history counts of it. Without it (a holder
   * of an earlier release), the lease's permits less `unused`.
   */
  used?: number;
  /**
   * The admission ids of the requests admitted from it (a location holder's stock) that no report
   * has carried yet. The answer to such a request can be lost on its way from the holder, and the
   * isolate then asks the key's object with the same id: the object counts each id once, whether
   * it decided the request too or is asked after this report. An isolate's own lease reports
   * none: what it admits never goes anywhere else.
   */
  admissionIds?: string[];
}

/**
 * Leases handed back together in one call (`QuotaLimiter.returnLeases`: a location holder's
 * standing permits and stock at once, rather than a call each). Each is taken back as a lone
 * ReturnedLease would be.
 */
export interface LeaseReturn {
  /**
   * One per hand-back, the same on each delivery of it: delivered again (a retry after a lost
   * answer), it takes nothing back again (the object remembers it for ADMISSION_MEMORY_MS).
   */
  returnId: string;
  returning: ReturnedLease[];
}

/**
 * How far an admission id's time (see `newAdmissionId`) may be ahead of the clock of the tier that
 * reads it, or a lease's minute ahead of the clock of the key's object (a clock that stepped
 * back): far more than the clocks of two machines ever differ.
 */
export const ADMISSION_CLOCK_TOLERANCE_MS = 15_000;

/**
 * A request is decided only within this long of when its admission id was made (by the deciding
 * tier's clock): an attempt that arrives later (a call held on its way) is not decided, as the
 * tier may have decided it and forgotten. Every attempt of a request is made within the request,
 * seconds after the id.
 */
export const ADMISSION_ID_LIFETIME_MS = 45_000;

/**
 * How long the tier that decided a request remembers its admission id with the decision (and the
 * key's object a renewal's id with its answer): every attempt a tier may still decide (within
 * ADMISSION_ID_LIFETIME_MS of its id, which is at most ADMISSION_CLOCK_TOLERANCE_MS ahead) finds
 * the decision. The key's object keeps ids longer while a location holder's stock may still
 * report them (objects/admission-memory.ts).
 */
export const ADMISSION_MEMORY_MS = ADMISSION_ID_LIFETIME_MS + ADMISSION_CLOCK_TOLERANCE_MS;

/** An admission id made at `now`: the time it was made, then a random part. */
export const newAdmissionId = (now: number): string => `${now.toString(36)}.${crypto.randomUUID()}`;

/** When admission id `id` was made, or null for an id that does not say (an earlier release's). */
export function admissionIdMadeAt(id: string): number | null {
  const made = /^([0-9a-z]{1,12})\.[0-9a-f-]{36}$/.exec(id);
  return made ? Number.parseInt(made[1]!, 36) : null;
}

/**
 * Whether a tier may still decide admission id `id` at `now` (by its own clock): made less than
 * ADMISSION_ID_LIFETIME_MS ago, and not more than ADMISSION_CLOCK_TOLERANCE_MS ahead. An id that
 * does not say when it was made (a Worker of the release before) is decided as before.
 */
export function admissionIdLive(id: string, now: number): boolean {
  const made = admissionIdMadeAt(id);
  if (made === null) return true;
  return now - made < ADMISSION_ID_LIFETIME_MS && made - now < ADMISSION_CLOCK_TOLERANCE_MS;
}

/** What an isolate asks for along with one request. */
export interface LeaseRequest {
  /** Permits wanted on top of this request (0: decide this request only). */
  want: number;
  /** The isolate's previous leases with unused permits to give back (taken back first). */
  returning: ReturnedLease[];
  /**
   * The request's admission id, made by the Worker once per API request and sent with every
   * attempt to decide it: the key's object decides an id once and answers it again with the same
   * decision for ADMISSION_MEMORY_MS. A caller that sends one also reads its copy of the key
   * again when told its copy is stale (an older version than the object's): the object answers
   * such a request `stale`, counting nothing, rather than deciding it under a policy the caller's
   * copy does not know (a roll, an expiry). Without one (an earlier release), it decides.
   */
  admissionId?: string;
  /** As RenewalRequest's. */
  minuteWant?: number;
  /** As RenewalRequest's. */
  standing?: number;
}

/**
 * A location holder's standing permits for the minute starting at `minuteStart` (see
 * quota/standing.ts): counted in that minute's window as it starts, used only within it.
 */
export interface StandingPermit {
  id: string;
  permits: number;
  minuteStart: number;
}

/** Permits counted as used for the isolate, valid until `expiresAt` (epoch ms). */
export interface Lease {
  id: string;
  permits: number;
  expiresAt: number;
}

/** A busy isolate's request for more permits on the lease it is still using (no request). */
export interface RenewalRequest {
  /** The lease in use: extended when it was granted in the current minute window. */
  leaseId: string;
  /** Permits wanted on top of what the isolate holds. */
  want: number;
  /** The lease's permits the isolate has not used yet (it never holds more than one lease's worth). */
  holding: number;
  /** Previous leases with unused permits to give back (taken back first). */
  returning: ReturnedLease[];
  /** Requests admitted from the lease in use so far (the usage history counts them now). */
  used?: number;
  /** As ReturnedLease's: ids admitted from the lease in use since its last report. */
  admissionIds?: string[];
  /**
   * The renewal's id, one per renewal sent: one delivered twice is granted once (the object
   * answers the same id with the same answer for ADMISSION_MEMORY_MS). Without one (an earlier
   * release), each delivery grants.
   */
  renewalId?: string;
  /**
   * A location holder's: the requests it expects for the rest of the minute at the key's last
   * gap there (see minuteStockWanted). A stock for the minute is sized to it, within heldBound,
   * while no other holder has asked the key's object for permits lately (stockSizedToTheMinute).
   * Without it (an isolate, or an earlier release), `want` alone.
   */
  minuteWant?: number;
  /**
   * A location holder's: the standing permits it wants in each of the next minutes (see
   * quota/standing.ts), granted while the key is far from its limits. An object of an earlier
   * release ignores it and grants none.
   */
  standing?: number;
}

/**
 * The answer to a renewal. `windows` are the object's before this grant (the isolate adds back
 * what it was holding). `granted` is null when no permits were granted: the key is refused,
 * banned, revoked or near its limit, and the isolate goes back to asking with each request once
 * its lease is used. `granted.id` is the lease's own id when it was extended, else a new lease's.
 */
export interface Renewal {
  policyVersion: number;
  revoked: boolean;
  windows: WindowStatus[];
  granted: Lease | null;
  /**
   * The object's clock when it answered: the holder ends the lease by its own clock, its lifetime
   * left at `now` after it asked (see localExpiry in held-lease.ts). Absent from an object of an
   * earlier release.
   */
  now?: number;
  /** Standing permits granted with it (absent: none; an object of an earlier release). */
  standing?: StandingPermit[];
}

/**
 * Whether a renewal's answer ends a holder's leases: revoked, or granted under a newer policy
 * than `version`, the one the holder's lease or call was under (the plan changed). The holder
 * then keeps nothing it granted; its next request asks.
 */
export const endsLeases = (answer: Renewal, version: number): boolean =>
  answer.revoked || answer.policyVersion > version;

/**
 * The decision on one request, plus the lease granted with it, if any. The decision's windows
 * are the object's after this request and before the lease: the isolate subtracts what it admits
 * from the lease, so its headers read as if each request had been decided here.
 */
export type Admission = KeyDecision & {
  lease: Lease | null;
  standing?: StandingPermit[];
  /**
   * No stock only because other location holders hold the bound: they are asked to share it, and
   * the holder's refill sent now is answered once they have (objects/stock-sharing.ts).
   */
  sharing?: true;
};

/**
 * What a location holder gave up of its stock when asked to share the bound (QuotaHolder.restock):
 * `cut` permits of lease `id`, of which it had seen `seen` granted (used and unused).
 */
export type SharedStock = { id: string; seen: number; cut: number };
