import { DAY_MS, MINUTE_MS } from "../lib/clock";
import { GIVE_BACK_GRACE_MS } from "./lease";

// Standing permits: a location holder's permits for the minutes to come, so that a sparse key's
// next requests there need no call to its object (docs/quotas.md, "Standing permits").

/**
 * The minutes after the current one a grant covers at least (an ask of the release before: 6);
 * times heldBound, the most standing permits of a key out at once, all locations together.
 */
export const STANDING_MINUTES = 6;

/** A grant covers the key's next this many requests at its spacing: one call per that many. */
export const STANDING_REQUESTS_AHEAD = 6;

/** The most minutes after the current one a grant covers, whatever the key's gap. */
export const STANDING_MOST_MINUTES = 30;

/** The minutes to come a holder asks standing permits for, at the key's spacing `gapMs` there. */
export function standingMinutesWanted(gapMs: number): number {
  const ahead = Math.ceil((STANDING_REQUESTS_AHEAD * gapMs) / MINUTE_MS);
  return Math.min(STANDING_MOST_MINUTES, Math.max(STANDING_MINUTES, ahead));
}

/** Standing permits are asked for from this spacing on; busier keys keep the minute's stock. */
export const STANDING_GAP_MS = 30_000;

/** The standing permits a holder asks for each minute at the key's spacing there (0: none yet). */
export function standingWanted(gapMs: number): number {
  return gapMs >= STANDING_GAP_MS ? Math.ceil((0.9 * MINUTE_MS) / gapMs) : 0;
}

/** The `minutes` after the one at `now` a grant covers, within the UTC day (counted in it). */
export function standingMinutesFrom(now: number, minutes = STANDING_MINUTES): number[] {
  const minute = now - (now % MINUTE_MS);
  const most = Math.min(STANDING_MOST_MINUTES, Math.max(STANDING_MINUTES, minutes));
  const count = Math.min(most, (now - (now % DAY_MS) + DAY_MS - minute) / MINUTE_MS - 1);
  return Array.from({ length: Math.max(0, count) }, (_, i) => minute + (i + 1) * MINUTE_MS);
}

/** An evicted holder's alarm hands standing permits back this long after its memory would have. */
export const STANDING_ALARM_SLACK_MS = 1_000;

/**
 * A holder with standing permits for a key that stopped calling there ends its calls within this
 * of its last request: its last minute ends STANDING_MOST_MINUTES + 2 on at most, then the
 * hand-back (from the alarm, if evicted meanwhile).
 */
export const STANDING_BACKGROUND_ENDS_WITHIN_MS =
  (STANDING_MOST_MINUTES + 2) * MINUTE_MS + GIVE_BACK_GRACE_MS + STANDING_ALARM_SLACK_MS;

/** The most calls a location holder makes for a key that stopped calling there (docs/quotas.md). */
export const STOPPED_KEY_OBJECT_CALLS = 3;
