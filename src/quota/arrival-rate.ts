import { MINUTE_MS } from "../lib/clock";
import { STANDING_GAP_MS } from "./standing";

/**
 * Rate estimation: how busy a key is in one holder (an isolate, or a location holder), from the
 * arrival times of its requests there, and so how many permits a lease for it should hold.
 */
/** The key's recent rate in an isolate is measured over this long. */
export const RATE_HORIZON_MS = 10_000;

/** Below two requests a second (in the last second and on average over the horizon): quiet. */
const BUSY_PER_SECOND = 2;

/**
 * The permits an isolate asks for, from the arrival times (ms) of the key's requests in this
 * isolate: enough for a lease's lifetime (`lifetimeMs`) at the key's recent rate, the higher of
 * its rate in the last second and its average over the last RATE_HORIZON_MS (so a key that paused
 * for a few seconds is still sized from what it did before, and a key that speeds up is sized
 * from its new rate). A quiet key (fewer than two requests in the last second and fewer than two
 * a second on average over the horizon) asks for none and is decided request by request, so it
 * locks up nothing.
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

// Enough arrivals to size any lease; older ones fall out after RATE_HORIZON_MS anyway (when
// more arrive in the horizon, the oldest are dropped and the rate is measured over the rest).
const MAX_ARRIVALS = 2_000;

/**
 * The arrival times of one key's requests in one holder, over the last RATE_HORIZON_MS; and when
 * the last one arrived and the gap before it, which size a location holder's standing permits.
 */
export class ArrivalRate {
  #arrivals: number[] = [];
  /** When the key's last request arrived here (null: none yet), and the gap before it. */
  lastArrival: number | null = null;
  gapMs = 0;

  /** Notes a request arriving at `now`. */
  note(now: number): void {
    this.#arrivals.push(now);
    if (this.#arrivals.length > MAX_ARRIVALS) this.#arrivals.shift();
    this.gapMs = this.lastArrival === null ? 0 : Math.max(0, now - this.lastArrival);
    this.lastArrival = now;
  }

  /**
   * The key's gap here, as standing permits are sized by: its last gap, or for a key seen once
   * here (no gap yet) the time since, which it is at least as sparse as; and once a minute has
   * begun since that one request, at least STANDING_GAP_MS: at the next minute's refill, a key
   * that sent one request in the minute before gets standing permits however late in that minute
   * it came (sized as for that gap until its next request here tells its own).
   */
  sparseGap(now: number): number {
    const last = this.lastArrival;
    if (this.gapMs > 0 || last === null) return this.gapMs;
    const minuteBegunSince = last < now - (now % MINUTE_MS);
    return minuteBegunSince ? Math.max(STANDING_GAP_MS, now - last) : now - last;
  }

  /**
   * The permits to ask for at `now` for the key's recent rate, for a lease living `lifetimeMs`
   * (see `leaseWanted`).
   */
  leaseWanted(now: number, lifetimeMs: number): number {
    while (this.#arrivals.length && this.#arrivals[0]! <= now - RATE_HORIZON_MS)
      this.#arrivals.shift();
    return leaseWanted(this.#arrivals, now, lifetimeMs);
  }
}
