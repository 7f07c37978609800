import { grantedForTheMinute, type LeaseInUse } from "./lease";
import type { Lease, ReturnedLease } from "./lease-messages";
import type { KeyDecision, WindowStatus } from "./windows";

/**
 * A lease as its holder (an isolate, or a location holder) keeps it, and what it sends back of it:
 * the parts HeldLeases (held-lease.ts) and LeaseHolder (lease-holder.ts) share.
 */

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

export interface HeldLease extends LeaseInUse {
  id: string;
  policyVersion: number;
  /** Requests admitted from it: reported with its renewals and its hand-back (the usage history counts them). */
  used: number;
  /** The admission ids of those not reported yet (a location holder's; see ReturnedLease). */
  admissionIds: string[];
  /**
   * Granted along with standing permits: the key's object waits for its report as long as for
   * theirs (objects/standing-ledger.ts), so it goes back with them rather than in a call of its own.
   */
  withStanding?: boolean;
}

/**
 * When a lease ends by this holder's own clock. A lease never outlives the minute it was counted
 * in (quota/lease.ts), and the holder must not admit from it once that minute is over by the
 * object's clock, whatever its own reads: the object then admits a whole new minute. So the time
 * the minute had left when the object answered (`answer.now`) is counted from `sentAt`, when this
 * holder asked (before the answer, whatever the two clocks read), and the lease ends then if that
 * comes before its expiry. With clocks that agree this changes nothing but for a lease that ends
 * with its minute, which ends a round trip early.
 */
export function localExpiry(
  granted: Lease,
  answer: { now: number; windows: WindowStatus[] },
  sentAt: number,
): number {
  const minuteEnd = answer.windows.find((w) => w.name === "minute")?.resetAt;
  if (minuteEnd === undefined) return granted.expiresAt;
  return Math.min(granted.expiresAt, sentAt + Math.max(0, minuteEnd - answer.now));
}

/**
 * A lease the object has just granted under policy `policyVersion` in `answer`, none of it used
 * yet, ending at `expiresAt` by this holder's clock (see localExpiry).
 */
export function heldLease(
  granted: Lease,
  answer: { policyVersion: number; now: number },
  expiresAt: number,
  { withStanding = false }: { withStanding?: boolean } = {},
): HeldLease {
  return {
    id: granted.id,
    left: granted.permits,
    lastGrant: granted.permits,
    expiresAt,
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

/** What an isolate had when it sent a renewal, to read the answer against. */
export interface SentRenewal {
  /** The lease in use. */
  lease: HeldLease;
  /** Its permits not used yet. */
  holding: number;
  /** Admissions since the last contact. */
  admitted: number;
  /** That contact's windows. */
  windows: WindowStatus[];
  /** `changes` then. */
  changes: number;
  /** When it was sent, by this holder's clock. */
  at: number;
}
