import { MINUTE_MS } from "../lib/clock";
import { heldBound, MINUTE_STOCK_ROOM_SHARE } from "../quota/lease";
import type { Lease, StandingPermit } from "../quota/lease-messages";
import type { Limits } from "../quota/plans";
import { STANDING_MINUTES, standingMinutesFrom } from "../quota/standing";
import { type UsageState, type WindowStatus, windowsOf } from "../quota/windows";
import { insertLease, type LeaseAsk, type LeaseLedger } from "./lease-ledger";

/**
 * The standing permits the key's object grants location holders (quota/standing.ts): rows of its
 * `leases` table of the minute they may be used in, settled as any lease (counted in the day at
 * the grant, in that minute as it starts), waited for until their holder's last minute ends.
 */
export class StandingLedger {
  constructor(
    private readonly sql: SqlStorage,
    private readonly leases: LeaseLedger,
  ) {}

  /**
   * What an admitted request or a renewal lends: the lease asked for, then `ask.standing` in each
   * minute to come (standingMinutesFrom) `grantee` does not hold yet, within the bounds below.
   */
  lend(
    counted: UsageState,
    windows: WindowStatus[],
    limits: Limits,
    ask: LeaseAsk & { standing?: number; standingMinutes?: number },
    now: number,
    grantee: string | null,
  ): { state: UsageState; lease: Lease | null; standing?: StandingPermit[] } {
    // A request asking for no lease need not read what the leases hold; a renewal always asks.
    const asksLease = ask.want > 0 || ask.extending !== undefined;
    const lent = asksLease
      ? this.leases.lend(counted, windows, limits, ask, now, grantee)
      : { state: counted, lease: null };
    const { state, lease } = lent;
    const permits = ask.standing ?? 0;
    if (grantee === null || permits <= 0) return lent;
    // The day's leases of other minutes (standing permits to come, or not handed back yet).
    const others = this.sql
      .exec<{ minute: number; grantee: string | null; held: number }>(
        "SELECT minute_start AS minute, grantee, held FROM leases WHERE day_start = ? AND minute_start != ?",
        state.dayStart,
        state.minuteStart,
      )
      .toArray();
    const heldIn = (m: number) => others.reduce((n, r) => (r.minute === m ? n + r.held : n), 0);
    const own = others.filter((r) => r.grantee === grantee).map((r) => r.minute);
    // The earliest minutes asked for that stay within their heldBound, the key's standing permits
    // out within STANDING_MINUTES × heldBound, and the key far from both limits after them all.
    const bound = heldBound(limits);
    const room = Math.min(...windowsOf(state, limits).map((w) => w.remaining));
    const out = others.reduce((n, r) => n + r.held, 0);
    const fit = Math.min(STANDING_MINUTES * bound - out, room - MINUTE_STOCK_ROOM_SHARE * bound);
    // The minutes after the one the windows are in, which a clock stepping back does not leave:
    // a permit of that minute would be counted in the day only, never in its window.
    const minutes = standingMinutesFrom(Math.max(now, state.minuteStart), ask.standingMinutes)
      .filter((m) => !own.includes(m) && heldIn(m) + permits <= bound)
      .slice(0, Math.max(0, Math.floor(fit / permits)));
    const total = permits * minutes.length;
    if (total === 0) return lent;
    const waitedUntil = Math.max(...minutes, ...own) + MINUTE_MS;
    const standing = minutes.map((minuteStart) => ({
      id: crypto.randomUUID(),
      permits,
      minuteStart,
    }));
    // The holder hands back all it holds after its last minute: its leases still out (a stock
    // that lives this minute too) are waited for as long, not stranded before.
    this.sql.exec(
      `UPDATE leases SET expires_at = ?
         WHERE grantee = ? AND expires_at >= ? AND expires_at >= minute_start + ? AND expires_at < ?`,
      waitedUntil,
      grantee,
      state.minuteStart + MINUTE_MS,
      MINUTE_MS,
      waitedUntil,
    );
    const row = { dayStart: state.dayStart, expiresAt: waitedUntil, grantee };
    for (const s of standing) insertLease(this.sql, { ...s, ...row });
    if (lease)
      this.sql.exec(
        "UPDATE leases SET expires_at = MAX(expires_at, ?) WHERE id = ?",
        waitedUntil,
        lease.id,
      );
    return { state: { ...state, dayCount: state.dayCount + total }, lease, standing };
  }

  /** Of the standing permits an earlier answer gave, those still out (that answer repeated). */
  stillOut(standing: StandingPermit[] | undefined): { standing?: StandingPermit[] } {
    const out = standing?.filter((s) => this.leases.grantedIn(s.id) !== null) ?? [];
    return out.length > 0 ? { standing: out } : {};
  }

  /** `rolled`, just moved into a new minute, with the standing permits granted for it counted. */
  countedAsItStarts(rolled: UsageState): UsageState {
    const reserved = this.leases.sumIn("permits", rolled.minuteStart, rolled.dayStart);
    return reserved === 0 ? rolled : { ...rolled, minuteCount: rolled.minuteCount + reserved };
  }
}
