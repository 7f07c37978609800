import { MINUTE_MS } from "../lib/clock";
import { STANDING_GAP_MS } from "./standing";

/** The key's recent rate in a holder is measured over this long. */
export const RATE_HORIZON_MS = 10_000;

/** Below two requests a second (in the last second and on average over the horizon): quiet. */
const BUSY_PER_SECOND = 2;

/**
 * The permits to ask for: a lease's lifetime at the higher of the key's rate in the last second
 * and its average over RATE_HORIZON_MS (a key that paused is still sized from what it did before,
 * one that speeds up from its new rate). A quiet key asks for none, so it locks up nothing.
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

/** One key's arrivals in one holder: its recent rate, and its last gap. */
export class ArrivalRate {
  #arrivals: number[] = [];
  /** When the key's last request arrived here (null: none yet), and the gap before it. */
  lastArrival: number | null = null;
  gapMs = 0;

  note(now: number): void {
    this.#arrivals.push(now);
    if (this.#arrivals.length > MAX_ARRIVALS) this.#arrivals.shift();
    this.gapMs = this.lastArrival === null ? 0 : Math.max(0, now - this.lastArrival);
    this.lastArrival = now;
  }

  /**
   * The key's gap as standing permits are sized by: its last gap, or for a key seen once here the
   * time since; once a minute has begun since, at least STANDING_GAP_MS (so the next minute's
   * refill gets standing permits however late in its minute the one request came).
   */
  sparseGap(now: number): number {
    const last = this.lastArrival;
    if (this.gapMs > 0 || last === null) return this.gapMs;
    const minuteBegunSince = last < now - (now % MINUTE_MS);
    return minuteBegunSince ? Math.max(STANDING_GAP_MS, now - last) : now - last;
  }

  leaseWanted(now: number, lifetimeMs: number): number {
    while (this.#arrivals.length && this.#arrivals[0]! <= now - RATE_HORIZON_MS)
      this.#arrivals.shift();
    return leaseWanted(this.#arrivals, now, lifetimeMs);
  }
}
