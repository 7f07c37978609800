import { MINUTE_MS } from "../lib/clock";
import { STANDING_GAP_MS } from "./standing";

/** The key's recent rate in a holder is measured over this long. */
export const RATE_HORIZON_MS = 10_000;

/** Below two requests a second (in the last second and on average over the horizon): quiet. */
const BUSY_PER_SECOND = 2;

/**
 * The permits to ask for: a lease's lifetime at the higher of the key's rate in the last second
 * and its average over RATE_HORIZON_MS (a key that paused is still sized from what it did before,
 * one that speeds up from its new rate); none for a quiet key, so it locks up nothing.
 */
export function leaseWanted(arrivals: readonly number[], now: number, lifetimeMs: number): number {
  let lastSecond = 0;
  let inHorizon = 0;
  let oldest = now;
  for (const t of arrivals) {
    if (t > now || t <= now - RATE_HORIZON_MS) continue;
    inHorizon++;
    if (t > now - 1_000) lastSecond++;
    if (t < oldest) oldest = t;
  }
  // The average over the time the horizon's requests really span, at least a second.
  const averagePerSecond = (inHorizon * 1_000) / Math.max(1_000, now - oldest);
  const horizonBusy = (inHorizon * 1_000) / RATE_HORIZON_MS >= BUSY_PER_SECOND;
  if (lastSecond < BUSY_PER_SECOND && !horizonBusy) return 0;
  const perSecond = Math.max(lastSecond, averagePerSecond);
  return Math.ceil((perSecond * lifetimeMs) / 1_000);
}

// Enough arrivals to size any lease (past it, the oldest are dropped).
const MAX_ARRIVALS = 2_000;

/**
 * A key's gaps ending within this of its last request are its recent ones (see longestGapMs): a
 * minute, so that a key calling once a minute keeps its gap.
 */
export const RECENT_GAPS_MS = MINUTE_MS;

// The most recent arrivals kept to find those gaps (a longer burst than this is measured within).
const MAX_RECENT_ARRIVALS = 256;

/** One key's arrivals in one holder: its recent rate, its last gap, and its recent gaps. */
export class ArrivalRate {
  #arrivals: number[] = [];
  /** The arrivals whose gaps end within RECENT_GAPS_MS of the last one, and the one before. */
  #recent: number[] = [];
  /** What #recent gives (null: not worked out since it changed). */
  #gaps: { longestMs: number; spacingMs: number } | null = null;
  /** When the key's last request arrived here (null: none yet), and the gap before it. */
  lastArrival: number | null = null;
  gapMs = 0;

  note(now: number): void {
    this.#arrivals.push(now);
    if (this.#arrivals.length > MAX_ARRIVALS) this.#arrivals.shift();
    this.gapMs = this.lastArrival === null ? 0 : Math.max(0, now - this.lastArrival);
    this.lastArrival = now;
    const recent = this.#recent;
    recent.push(now);
    while (
      recent.length > MAX_RECENT_ARRIVALS ||
      (recent.length > 2 && recent[1]! < now - RECENT_GAPS_MS)
    )
      recent.shift();
    this.#gaps = null;
  }

  /** Holds again a key's last arrival and the gap before it (kept across an eviction). */
  restore(lastArrival: number | null, gapMs: number): void {
    this.lastArrival = lastArrival;
    this.gapMs = gapMs;
    this.#recent = [];
    if (lastArrival !== null)
      this.#recent = gapMs > 0 ? [lastArrival - gapMs, lastArrival] : [lastArrival];
    this.#gaps = null;
  }

  /** The longest recent gap here (0: none yet): a pair every 10 s has 9.9 s, its last gap 0.1 s. */
  get longestGapMs(): number {
    return this.#recentGaps().longestMs;
  }

  /** The mean gap since the longest recent gap began (0: none yet): a pair every minute, 30 s. */
  get spacingMs(): number {
    return this.#recentGaps().spacingMs;
  }

  #recentGaps(): { longestMs: number; spacingMs: number } {
    if (this.#gaps) return this.#gaps;
    const recent = this.#recent;
    const last = recent.length - 1;
    let longestMs = 0;
    let longestAt = last; // where the longest gap ends (the latest of equal ones)
    for (let i = 1; i <= last; i++) {
      const gap = Math.max(0, recent[i]! - recent[i - 1]!);
      if (gap >= longestMs) {
        longestMs = gap;
        longestAt = i;
      }
    }
    const since = last > 0 ? Math.max(0, recent[last]! - recent[longestAt - 1]!) : 0;
    this.#gaps = { longestMs, spacingMs: last > 0 ? since / (last - longestAt + 1) : 0 };
    return this.#gaps;
  }

  /**
   * The gap standing permits are sized by: spacingMs, or for a key seen once the time since; once
   * a minute has begun since, at least STANDING_GAP_MS (the next refill gets standing permits).
   */
  sparseGap(now: number): number {
    const last = this.lastArrival;
    const spacing = this.spacingMs;
    if (spacing > 0 || last === null) return spacing;
    const minuteBegunSince = last < now - (now % MINUTE_MS);
    return minuteBegunSince ? Math.max(STANDING_GAP_MS, now - last) : now - last;
  }

  leaseWanted(now: number, lifetimeMs: number): number {
    while (this.#arrivals.length && this.#arrivals[0]! <= now - RATE_HORIZON_MS)
      this.#arrivals.shift();
    return leaseWanted(this.#arrivals, now, lifetimeMs);
  }
}
