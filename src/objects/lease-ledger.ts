import { MINUTE_MS } from "../lib/clock";
import {
  givePermitsBack,
  leaseExpiry,
  leaseLifetimeMs,
  permitsToLease,
  QUIET_STOCK,
  STOCK_LEASE_MS,
  stockLivesTheMinute,
  takePermits,
} from "../quota/lease";
import type { Lease, ReturnedLease, SharedStock } from "../quota/lease-messages";
import type { Limits } from "../quota/plans";
import type { UsageState, WindowStatus } from "../quota/windows";
import { StockSharing } from "./stock-sharing";
import type { UsageHistoryTable } from "./usage-history-table";

/**
 * A lease not handed back this long after its expiry, its minute over, is settled as stranded:
 * under a minute, so every lease of a day is settled by the day-end flush.
 */
export const STRANDED_AFTER_MS = 30_000;

type LeaseRow = {
  id: string;
  minuteStart: number;
  dayStart: number;
  permits: number;
  /** Permits the usage history counts as served so far. */
  counted: number;
};

const LEASE_ROW = `SELECT id, minute_start AS minuteStart, day_start AS dayStart, permits, counted
  FROM leases`;

export type LeaseAsk = { want: number; holding: number; extending?: string; minuteWant?: number };

const clampTo = (most: number, n: number): number => Math.max(0, Math.min(most, n));

/**
 * The leases granted and not settled yet: the windows count their permits from the grant, the
 * usage history as their holder reports them used (docs/quotas.md, "Billing").
 */
export class LeaseLedger {
  /** Which holders asked lately, and the sharing under way (in memory only). */
  readonly sharing = new StockSharing();

  constructor(
    private readonly sql: SqlStorage,
    private readonly history: UsageHistoryTable,
  ) {}

  sumIn(column: "held" | "permits", minuteStart: number, dayStart: number, except = ""): number {
    return this.sql
      .exec<{ total: number }>(
        `SELECT COALESCE(SUM(${column}), 0) AS total FROM leases
           WHERE minute_start = ? AND day_start = ? AND id != ?`,
        minuteStart,
        dayStart,
        except,
      )
      .one().total;
  }

  /**
   * Lends up to `want` on top of `holding` (permitsToLease) to `grantee` (null: an isolate): to
   * lease `extending` if of this minute, else a new one; the windows count them at once (`state`).
   */
  lend(
    state: UsageState,
    windows: WindowStatus[],
    limits: Limits,
    { want, holding, extending, minuteWant = 0 }: LeaseAsk,
    now: number,
    grantee: string | null,
  ): { state: UsageState; lease: Lease | null } {
    // The most the minute's other leases may hold unused. A lease counts until it is handed back,
    // used up or not, even one whose holder went away: what leases hold never exceeds heldBound.
    const heldElsewhere = this.sumIn("held", state.minuteStart, state.dayStart, extending);
    const askingAlone = this.sharing.noteAsking(grantee, now);
    const sized = minuteWant > want && askingAlone && !this.#leaseOfAnotherOut(grantee);
    const asked = sized ? minuteWant : want;
    let permits = permitsToLease(windows, limits, asked, holding, heldElsewhere);
    // Only a stock for the minute (stockLivesTheMinute) is sized to the minute; else `want`.
    let forTheMinute = stockLivesTheMinute(windows, limits, permits);
    if (sized && !forTheMinute) {
      permits = permitsToLease(windows, limits, want, holding, heldElsewhere);
      forTheMinute = stockLivesTheMinute(windows, limits, permits);
    }
    const ask = { grantee, want, holding, renewing: extending !== undefined };
    this.#noteSharing(state, windows, limits, ask, permits, now);
    if (permits <= 0) return { state, lease: null };
    const expiresAt = leaseExpiry(state, now, leaseLifetimeMs(grantee, { forTheMinute }));
    const extended =
      extending === undefined ? null : this.#extend(extending, state, permits, holding, expiresAt);
    const lease = extended ?? { id: crypto.randomUUID(), permits, expiresAt };
    const { minuteStart, dayStart } = state;
    if (!extended) insertLease(this.sql, { ...lease, minuteStart, dayStart, grantee });
    return { state: takePermits(state, permits), lease };
  }

  /**
   * When location holder `grantee` got less than a quiet stock only because others hold heldBound,
   * those holding over QUIET_STOCK past a short stock's life are asked to share, once a minute.
   */
  #noteSharing(
    state: UsageState,
    windows: WindowStatus[],
    limits: Limits,
    { grantee, want, holding, renewing }: LeaseAsk & { grantee: string | null; renewing: boolean },
    granted: number,
    now: number,
  ): void {
    const stock = Math.min(want, QUIET_STOCK);
    if (grantee === null || granted >= stock) return;
    if (permitsToLease(windows, limits, stock, holding, 0) <= granted) return;
    if (this.sharing.askedThisMinute(grantee, state.minuteStart)) return;
    const sharers = this.sql
      .exec<{ grantee: string }>(
        `SELECT grantee FROM leases WHERE minute_start = ? AND day_start = ? AND grantee IS NOT NULL
           AND grantee != ? GROUP BY grantee HAVING SUM(held) > ? AND MAX(expires_at) > ?`,
        state.minuteStart,
        state.dayStart,
        grantee,
        QUIET_STOCK,
        now + STOCK_LEASE_MS,
      )
      .toArray()
      .map((row) => row.grantee);
    if (sharers.length === 0) return;
    this.sharing.ask({ waiting: grantee, sharers, tellWaiting: renewing }, state.minuteStart);
  }

  /** Counts back what a holder gave up of lease `id` to share the bound, if it saw all granted. */
  takeShared(state: UsageState, { id, seen, cut }: SharedStock): UsageState {
    const row = this.grantedIn(id);
    if (!row || row.permits !== seen || !(cut > 0 && cut <= seen)) return state;
    this.sql.exec(
      "UPDATE leases SET permits = permits - ?, held = MAX(0, held - ?) WHERE id = ?",
      cut,
      cut,
      id,
    );
    return givePermitsBack(state, row, cut);
  }

  /** Whether a lease not granted to location holder `grantee` (another's, or an isolate's) is out. */
  #leaseOfAnotherOut(grantee: string | null): boolean {
    return (
      this.sql
        .exec("SELECT 1 FROM leases WHERE grantee IS NULL OR grantee != ? LIMIT 1", grantee)
        .toArray().length > 0
    );
  }

  /** Adds `permits` to lease `id` (held: at most `holding` + them) if out and of this minute. */
  #extend(
    id: string,
    state: UsageState,
    permits: number,
    holding: number,
    expiresAt: number,
  ): Lease | null {
    // Never sooner than it was: a stock granted with standing permits is waited for as long as
    // they are (StandingLedger.lend), and its holder keeps it for them once renewed too.
    const extended = this.sql.exec(
      `UPDATE leases SET permits = permits + ?, expires_at = MAX(expires_at, ?), held = MIN(held, ?) + ?
         WHERE id = ? AND minute_start = ? AND day_start = ?`,
      permits,
      expiresAt,
      holding,
      permits,
      id,
      state.minuteStart,
      state.dayStart,
    ).rowsWritten;
    return extended > 0 ? { id, permits, expiresAt } : null;
  }

  /** Settles a returned lease once (null: settled already): the windows get the rest back. */
  takeBack(usage: UsageState, returned: ReturnedLease): UsageState | null {
    const row = this.grantedIn(returned.id);
    if (!row) return null;
    const used = clampTo(row.permits, returned.used);
    this.#settle(row, used, 0);
    return givePermitsBack(usage, row, row.permits - used);
  }

  oldestMinuteOut(): number | null {
    return this.sql
      .exec<{ minuteStart: number | null }>("SELECT MIN(minute_start) AS minuteStart FROM leases")
      .one().minuteStart;
  }

  /** What lease `id` of this minute holds unused by this object's count (0: not out, no `used`). */
  unusedOf(id: string, state: UsageState, used: number | undefined): number {
    const row = used === undefined ? undefined : this.grantedIn(id);
    const current = row?.minuteStart === state.minuteStart && row.dayStart === state.dayStart;
    return row && current ? row.permits - clampTo(row.permits, used ?? 0) : 0;
  }

  /** Lease `id` (the windows it was granted in), while it is out. */
  grantedIn(id: string): LeaseRow | null {
    return this.sql.exec<LeaseRow>(`${LEASE_ROW} WHERE id = ?`, id).toArray()[0] ?? null;
  }

  /** Ends a lease's account: the history counts `used` as served and `stranded` apart. */
  #settle(row: LeaseRow, used: number, stranded: number): void {
    this.sql.exec("DELETE FROM leases WHERE id = ?", row.id);
    // Negative only for a lease counted whole at grant (an earlier release's): its unused come off.
    this.history.countServed(row.dayStart, used - row.counted);
    this.history.strand(row.dayStart, stranded);
  }

  /** Counts a renewing holder's report that `used` of lease `id` were admitted. */
  countUsed(id: string, used: number): void {
    const row = this.grantedIn(id);
    if (!row) return;
    const counted = Math.max(row.counted, clampTo(row.permits, used));
    if (counted === row.counted) return;
    this.sql.exec("UPDATE leases SET counted = ? WHERE id = ?", counted, id);
    this.history.countServed(row.dayStart, counted - row.counted);
  }

  /** Strands the leases past STRANDED_AFTER_MS (still counted: they may have served). */
  strandUnreported(now: number): void {
    const rows = this.sql
      .exec<LeaseRow>(
        `${LEASE_ROW} WHERE expires_at <= ? AND minute_start <= ?`,
        now - STRANDED_AFTER_MS,
        now - MINUTE_MS,
      )
      .toArray();
    for (const row of rows) this.#settle(row, row.counted, row.permits - row.counted);
  }

  /** The location holders holding an unexpired lease of this minute, or standing permits. */
  granteesHolding(now: number): string[] {
    return this.sql
      .exec<{ grantee: string }>(
        `SELECT DISTINCT grantee FROM leases
           WHERE grantee IS NOT NULL AND minute_start >= ? AND expires_at > ?`,
        now - (now % MINUTE_MS),
        now,
      )
      .toArray()
      .map((row) => row.grantee);
  }

  /** The first day before `today` with a lease not settled yet, and those leases' first expiry. */
  unsettledBefore(today: number): { dayStart: number | null; expiresAt: number | null } {
    return this.sql
      .exec<{ dayStart: number | null; expiresAt: number | null }>(
        "SELECT MIN(day_start) AS dayStart, MIN(expires_at) AS expiresAt FROM leases WHERE day_start < ?",
        today,
      )
      .one();
  }
}

/** A lease of the current minute and standing permits of a minute to come are the same row. */
export function insertLease(
  sql: SqlStorage,
  lease: Omit<LeaseRow, "counted"> & { expiresAt: number; grantee: string | null },
): void {
  sql.exec(
    `INSERT INTO leases (id, minute_start, day_start, permits, expires_at, held, grantee)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    lease.id,
    lease.minuteStart,
    lease.dayStart,
    lease.permits,
    lease.expiresAt,
    lease.permits,
    lease.grantee,
  );
}
