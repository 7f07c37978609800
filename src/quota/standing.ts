import { DAY_MS, MINUTE_MS } from "../lib/clock";

/**
 * Standing permits: a location holder's permits for each of the next few minutes, granted by the
 * key's object in one call, so that a key calling about once a minute (or less often) in a
 * location has its next requests there answered with no call to its object at all. Each minute's
 * permits are counted by the key's object in that minute's window when the minute starts (and in
 * the day at the grant), held towards that minute's heldBound, and used by the holder only
 * within that minute: exactness is that of any lease (docs/quotas.md, "Standing permits").
 */

/**
 * How many minutes ahead (after the current one) a grant of standing permits covers. The holder
 * asks again only once it holds none for any minute after the current one, so a key calling once
 * a minute costs one call to its object per STANDING_MINUTES requests (plus its holder's call per
 * request): at most 1 + 1/STANDING_MINUTES Durable Object requests per request.
 */
export const STANDING_MINUTES = 6;

/**
 * A location holder asks for standing permits once the key's last gap there is at least this
 * long: at most two requests a minute, which the minute's refill would cost a call each for.
 * Keys calling more often (or not known yet: a key's first request there) keep the minute's stock
 * and its refill, and hold no permits for minutes to come.
 */
export const STANDING_GAP_MS = 30_000;

/**
 * The standing permits a holder asks for each minute, at the key's last gap `gapMs` there (0: none
 * yet): one, or two for a gap well under a minute (a key calling every minute, give or take a
 * tenth, gets one).
 */
export function standingWanted(gapMs: number): number {
  return gapMs >= STANDING_GAP_MS ? Math.ceil((0.9 * MINUTE_MS) / gapMs) : 0;
}

/**
 * The minutes a grant at `now` may cover: the next STANDING_MINUTES after the current one,
 * within the current UTC day (a day's permits are all counted in that day, and a finished day
 * goes to D1 once its leases are settled).
 */
export function standingMinutesFrom(now: number): number[] {
  const minute = now - (now % MINUTE_MS);
  const dayEnd = now - (now % DAY_MS) + DAY_MS;
  const out: number[] = [];
  for (let i = 1; i <= STANDING_MINUTES; i++) {
    const start = minute + i * MINUTE_MS;
    if (start < dayEnd) out.push(start);
  }
  return out;
}

/**
 * The background calls a location holder makes for a key that stopped calling there, while it
 * holds standing permits, end within this long of its last request: the next minute's refill may
 * grant them (a minute on at most) for the STANDING_MINUTES after its own, and what it holds goes
 * back once the last of those is over (GIVE_BACK_GRACE_MS after it).
 */
export const STANDING_BACKGROUND_ENDS_WITHIN_MS = (STANDING_MINUTES + 2) * MINUTE_MS + 250;

/**
 * The most calls a location holder makes to the key's object for a key that stopped calling
 * there, after its last request's answer: the next minute's refill (which hands the minute's
 * stock back), the hand-back of a stock at its expiry, and one hand-back of everything it still
 * holds (standing permits of every minute, and the stock granted with them) in a single call.
 */
export const STOPPED_KEY_OBJECT_CALLS = 3;
