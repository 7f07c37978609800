// The key's object's answers as a location holder's lease holder sees them, for tests that drive a
// LeaseHolder with fake calls: the windows of a contact, and an allowed admission.
import { MINUTE_MS } from "../src/lib/clock";
import type { Admission, Renewal } from "../src/quota/lease-messages";
import type { WindowStatus } from "../src/quota/windows";
import { T0 } from "./helpers";

/** The per-minute limit of these answers (a free key's); the day allows 1,000, 900 left. */
export const CONTACT_LIMIT = 60;

/** The windows of a contact in the minute of `minuteStart`, `remaining` left in it. */
export function atContact(minuteStart: number, remaining: number): WindowStatus[] {
  return [
    {
      name: "minute",
      limit: CONTACT_LIMIT,
      remaining,
      resetAt: minuteStart + MINUTE_MS,
      seconds: 60,
    },
    { name: "day", limit: 1_000, remaining: 900, resetAt: T0 + 86_400_000, seconds: 86_400 },
  ];
}

/** The object's answer at `now` (its clock) under `policyVersion`: allowed, 50 left, with `extra`. */
export function allowedAt(
  now: number,
  policyVersion: number,
  extra: { lease?: Admission["lease"]; standing?: Admission["standing"] } = {},
): Admission {
  return {
    outcome: "allowed",
    windows: atContact(now - (now % MINUTE_MS), 50),
    now,
    policyVersion,
    lease: null,
    ...extra,
  };
}

/** The object's answer at `now` to a renewal, under `policyVersion`, granting `granted` (null: none). */
export function renewedAt(
  now: number,
  policyVersion: number,
  granted: Renewal["granted"],
  windows: WindowStatus[],
): Renewal {
  return { policyVersion, revoked: false, windows, granted, now };
}
