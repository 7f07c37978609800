import { grantedForTheMinute, type LeaseInUse } from "./lease";
import type { Lease, ReturnedLease } from "./lease-messages";
import type { KeyDecision, WindowStatus } from "./windows";

// A lease as its holder keeps it, and what it sends back of it.

export interface HolderDecision {
  decision: KeyDecision;
  /** Decided here, from the lease, with no call. */
  local: boolean;
  /** This call was granted a new lease (its unused permits go back at expiry). */
  leaseGranted: boolean;
  /** A renewal this request started and does not wait for: whether it brought a lease. */
  renewal: Promise<boolean> | null;
}

export interface HeldLease extends LeaseInUse {
  id: string;
  policyVersion: number;
  /** Requests admitted from it, reported with its renewals and its hand-back (and billed). */
  used: number;
  /** The admission ids of those not reported yet (a location holder's; see ReturnedLease). */
  admissionIds: string[];
  /** Granted with standing permits: waited for as long as they are, it goes back with them. */
  withStanding?: boolean;
}

/**
 * When a lease ends by this holder's clock: never after it ends by the object's (past its minute
 * the object admits a new one; past its expiry it no longer pushes changes here). So the time it
 * had left when the object answered is counted from `sentAt`, before the answer by any clock.
 */
export function localExpiry(
  granted: Lease,
  answer: { now: number; windows: WindowStatus[] },
  sentAt: number,
): number {
  const minuteEnd = answer.windows.find((w) => w.name === "minute")?.resetAt ?? granted.expiresAt;
  return sentAt + Math.max(0, Math.min(granted.expiresAt, minuteEnd) - answer.now);
}

/** A lease the object has just granted in `answer` to a call sent at `sentAt` (see localExpiry). */
export function heldLease(
  granted: Lease,
  answer: { policyVersion: number; now: number; windows: WindowStatus[] },
  sentAt: number,
  { withStanding = false }: { withStanding?: boolean } = {},
): HeldLease {
  return {
    id: granted.id,
    left: granted.permits,
    lastGrant: granted.permits,
    expiresAt: localExpiry(granted, answer, sentAt),
    forTheMinute: grantedForTheMinute(granted.expiresAt, answer.now),
    policyVersion: answer.policyVersion,
    used: 0,
    admissionIds: [],
    ...(withStanding ? { withStanding } : {}),
  };
}

/** What goes back to the object of a lease no longer used (taking its ids not reported yet). */
export const returnOf = (lease: HeldLease): ReturnedLease => ({
  id: lease.id,
  unused: lease.left,
  used: lease.used,
  ...idsOf(lease.admissionIds.splice(0)),
});

/** The `admissionIds` field of a report: absent when there are none (an isolate's lease). */
export const idsOf = (admissionIds: string[]): { admissionIds?: string[] } =>
  admissionIds.length > 0 ? { admissionIds } : {};

/** What a holder had when it sent a renewal (`at`, by its clock), to read the answer against. */
export interface SentRenewal {
  lease: HeldLease;
  holding: number;
  /** Admissions since the last contact, whose windows are `windows`. */
  admitted: number;
  windows: WindowStatus[];
  changes: number;
  at: number;
}
