/** What a lease holder (an isolate, or a location holder) and the key's QuotaLimiter send each other. */
import type { KeyDecision, WindowStatus } from "./windows";

/** A lease's unused permits, handed back. Handing back the same lease twice credits it once. */
export interface ReturnedLease {
  id: string;
  unused: number;
  /** Requests admitted from the lease: what the usage history counts of it. */
  used: number;
  /** Ids of requests a location holder's stock admitted, not reported yet (admission-memory.ts). */
  admissionIds?: string[];
}

/** Leases handed back in one call (QuotaLimiter.returnLeases); a `returnId` again takes nothing. */
export type LeaseReturn = { returnId: string; returning: ReturnedLease[] };

/**
 * How far an admission id's time may be ahead of the reading tier's clock, or a lease's minute
 * ahead of the object's (a clock that stepped back): far more than two machines' clocks differ.
 */
export const ADMISSION_CLOCK_TOLERANCE_MS = 15_000;

/** A request is decided only within this of its admission id's making (later: maybe forgotten). */
export const ADMISSION_ID_LIFETIME_MS = 45_000;

/** How long the deciding tier remembers an admission id (or a renewal's) with its answer. */
export const ADMISSION_MEMORY_MS = ADMISSION_ID_LIFETIME_MS + ADMISSION_CLOCK_TOLERANCE_MS;

/** An admission id made at `now`: the time it was made, then a random part. */
export const newAdmissionId = (now: number): string => `${now.toString(36)}.${crypto.randomUUID()}`;

/** When admission id `id` was made, or null for an id that does not say (an earlier release's). */
export function admissionIdMadeAt(id: string): number | null {
  const made = /^([0-9a-z]{1,12})\.[0-9a-f-]{36}$/.exec(id);
  return made ? Number.parseInt(made[1]!, 36) : null;
}

/** Whether a tier may still decide admission id `id` at `now` (by its own clock). */
export function admissionIdLive(id: string, now: number): boolean {
  const made = admissionIdMadeAt(id);
  if (made === null) return true;
  return now - made < ADMISSION_ID_LIFETIME_MS && made - now < ADMISSION_CLOCK_TOLERANCE_MS;
}

/** What a holder asks the key's object for, with a request or in a renewal. */
interface Ask {
  /** Permits wanted on top of the request (0: decide it only) or of a renewal's `holding`. */
  want: number;
  /** Previous leases with unused permits to give back (taken back first). */
  returning: ReturnedLease[];
  /** A location holder's: the requests it expects for the rest of the minute (minuteStockWanted). */
  minuteWant?: number;
  /** A location holder's: the standing permits it wants in each of the next minutes. */
  standing?: number;
  /** How many minutes to come it wants them in (standingMinutesWanted; absent: STANDING_MINUTES). */
  standingMinutes?: number;
}

/** What an isolate asks for along with one request. */
export interface LeaseRequest extends Ask {
  /**
   * Made once per API request and sent with every attempt: decided once. A caller that sends one
   * reads its copy of the key again when answered `stale` (nothing counted).
   */
  admissionId?: string;
}

/** A location holder's standing permits for the minute starting at `minuteStart` (quota/standing.ts). */
export type StandingPermit = { id: string; permits: number; minuteStart: number };

/** Permits counted as used for the isolate, valid until `expiresAt` (epoch ms). */
export type Lease = { id: string; permits: number; expiresAt: number };

/** A busy isolate's request for more permits on the lease it is still using (no request). */
export interface RenewalRequest extends Ask {
  /** The lease in use: extended when it was granted in the current minute window. */
  leaseId: string;
  /** The lease's permits not used yet (never more than one lease's worth). */
  holding: number;
  /** Requests admitted from the lease in use so far (the usage history counts them now). */
  used?: number;
  /** As ReturnedLease's, since the lease's last report. */
  admissionIds?: string[];
  /** One per renewal sent: delivered twice, granted once. */
  renewalId?: string;
}

/**
 * The answer to a renewal: `windows` before this grant; `granted` null when none (refused, banned,
 * revoked or near the limit), else the lease's own id when extended, or a new lease's.
 */
export interface Renewal {
  policyVersion: number;
  revoked: boolean;
  windows: WindowStatus[];
  granted: Lease | null;
  /** The object's clock when it answered (see localExpiry). */
  now: number;
  /** Standing permits granted with it (absent: none). */
  standing?: StandingPermit[];
}

/** Whether a renewal's answer ends a holder's leases: revoked, or a newer policy than `version`. */
export const endsLeases = (answer: Renewal, version: number): boolean =>
  answer.revoked || answer.policyVersion > version;

/** The decision on one request (its windows after it, before the lease), and any lease granted. */
export type Admission = KeyDecision & {
  lease: Lease | null;
  standing?: StandingPermit[];
  /** No stock only because others hold the bound: they share it; a refill now waits for them. */
  sharing?: true;
  /** The answer given before to the same admission id (a retry, or a caller started again). */
  repeated?: true;
};

/** What a holder sharing the bound gave up: `cut` of lease `id`, of the `seen` it was granted. */
export type SharedStock = { id: string; seen: number; cut: number };
