import { MINUTE_MS } from "../lib/clock";
import type { Limits } from "./plans";
import type { UsageState, WindowStatus } from "./windows";

// A lease's permits count as used at the grant: it costs bounded under-admission, never more.

/** A lease's unused permits go back with its holder's next call, or this long after its expiry. */
export const GIVE_BACK_GRACE_MS = 250;

/** A change applies everywhere within this: an isolate's lease and a refusing copy live less. */
export const CHANGE_APPLIES_WITHIN_MS = 2_000;

/** An isolate's lease lives this long at most: nothing pushes a change to an isolate. */
export const ISOLATE_LEASE_MS = 1_750;

/** A location holder's stock not renewed is back in the key's object within this long of its grant. */
export const STOCK_BACK_WITHIN_MS = 5_000;

/** A location holder's stock lives this long at most: how long one a push missed admits from it. */
export const STOCK_LEASE_MS = STOCK_BACK_WITHIN_MS - GIVE_BACK_GRACE_MS;

/**
 * A location holder's stock lives to its minute's end while the tighter window keeps this many
 * times heldBound after the grant (a key calling every 10 s finds stock at every request); nearer
 * the limit it is short again, so permits a location stopped using come back sooner.
 */
export const MINUTE_STOCK_ROOM_SHARE = 4;

/** Whether a stock of `permits` granted now lives to its minute's end (`windows`: before it). */
export function stockLivesTheMinute(
  windows: WindowStatus[],
  limits: Limits,
  permits: number,
): boolean {
  const room = Math.min(...windows.map((w) => w.remaining)) - permits;
  return room >= MINUTE_STOCK_ROOM_SHARE * heldBound(limits);
}

/** The requests a location holder expects in the rest of the minute, one per `gapMs` (0: none). */
export function minuteStockWanted(now: number, minuteEnd: number, gapMs: number): number {
  return gapMs > 0 ? Math.ceil(Math.max(0, minuteEnd - now) / gapMs) : 0;
}

/**
 * A stock for the minute is sized to minuteStockWanted only while no other holder asked within
 * this long (a location still calling asks once a minute, its refill); else each keeps QUIET_STOCK.
 */
export const STOCK_SHARED_WITHIN_MS = 2 * MINUTE_MS;

/** A holder's calls for a key that stopped calling there end within this (docs/quotas.md). */
export const BACKGROUND_ENDS_WITHIN_MS = 2 * MINUTE_MS + GIVE_BACK_GRACE_MS;

/** A lease takes at most a quarter of the room left in the tighter window (and see heldBound). */
const ROOM_SHARE = 4;
const LIMIT_SHARE = 10;

/** The most permits a key's leases hold unused at once, everywhere (all they can strand). */
export function heldBound(limits: Limits): number {
  return Math.max(2, Math.floor(limits.perMinute / LIMIT_SHARE));
}

/** The stock a location holder keeps: enough for a quiet key's next requests while a refill is on its way. */
export const QUIET_STOCK = 2;

/**
 * The permits granted on top of a request or a renewal (its holder `holding` some, others
 * `heldElsewhere`): near the limit 0, one call per request, so 429s and the ban stay exact.
 */
export function permitsToLease(
  windows: WindowStatus[],
  limits: Limits,
  want: number,
  holding = 0,
  heldElsewhere = 0,
): number {
  const room = Math.min(...windows.map((w) => w.remaining));
  const most = Math.min(Math.floor(room / ROOM_SHARE), heldBound(limits) - heldElsewhere - holding);
  return Math.max(0, Math.min(want, most));
}

/**
 * An isolate renews its lease ahead of its expiry by RENEW_AHEAD_MARGIN × the slowest of its last
 * RENEWALS_TIMED renewals (back in time even if twice as slow), at least RENEW_AHEAD_MIN_MS (a
 * pause, a cold start), at most half the lease's life (also until a renewal is answered).
 */
export const RENEW_AHEAD_MARGIN = 2;
export const RENEWALS_TIMED = 4;
export const RENEW_AHEAD_MIN_MS = 100;
export const RENEW_AHEAD_MAX_MS = ISOLATE_LEASE_MS / 2;

/** How long ahead a holder renews: `fixedMs` (a location holder's stock), else by its renewals. */
export class RenewAhead {
  readonly #roundTrips: number[] = [];
  constructor(readonly fixedMs: number | null = null) {}

  /** Notes a renewal answered `ms` after it was sent. */
  answered(ms: number): void {
    if (this.#roundTrips.push(ms) > RENEWALS_TIMED) this.#roundTrips.shift();
  }

  get ms(): number {
    if (this.fixedMs !== null) return this.fixedMs;
    if (this.#roundTrips.length === 0) return RENEW_AHEAD_MAX_MS;
    const sized = RENEW_AHEAD_MARGIN * Math.max(...this.#roundTrips);
    return Math.min(RENEW_AHEAD_MAX_MS, Math.max(RENEW_AHEAD_MIN_MS, sized));
  }
}

/** No renewal is sent in a minute's last this long (see `renewsNow`). */
export const MINUTE_TAIL_MS = 1_000;

/** A holder's stock is renewed this long ahead: a key calling every STOCK_LEASE_MS finds stock. */
export const STOCK_RENEW_AHEAD_MS = STOCK_LEASE_MS / 2;

/** What an isolate knows of the lease it is using, to decide when to renew it. */
export interface LeaseInUse {
  /** Permits not used yet. */
  left: number;
  /** Permits the last grant (or renewal) added. */
  lastGrant: number;
  expiresAt: number;
  /** A location holder's stock for the rest of its minute (stockLivesTheMinute, `renewsNow`). */
  forTheMinute?: boolean;
}

/**
 * Whether a holder renews its lease now, in the background, while it still admits from it: once
 * half of the last grant (or of `stock`, if more) is used, or `aheadMs` before the lease expires,
 * unless it ends with its minute; never in the minute's last MINUTE_TAIL_MS (one due then goes
 * before it). An isolate's renewal is sent by the request whose successor (at the key's last gap
 * `gapMs`) would come after it is due. A stock for the minute is renewed only once used up, and
 * only if the key's last gap fits in what is left of the minute.
 */
export function renewsNow(
  lease: LeaseInUse,
  minuteEnd: number,
  now: number,
  {
    aheadMs = RENEW_AHEAD_MAX_MS,
    stock = 0,
    gapMs = 0,
  }: { aheadMs?: number; stock?: number; gapMs?: number } = {},
): boolean {
  if (now >= lease.expiresAt) return false; // over: the next call asks anew
  // In the tail a renewal adds permits for a few ms, and is often answered in the next minute.
  if (now >= minuteEnd - MINUTE_TAIL_MS) return false;
  if (lease.forTheMinute) return lease.left <= 0 && now + gapMs < lease.expiresAt;
  if (lease.left <= 0) return false;
  const halfUsed = lease.left * 2 <= Math.max(lease.lastGrant, stock);
  // A lease ending less than aheadMs before its minute (by this holder's clock, a one-way trip
  // early) ends with it: nothing extends it.
  const extendable = lease.expiresAt < minuteEnd - aheadMs;
  const tailStart = minuteEnd - MINUTE_TAIL_MS;
  const renewBy = extendable ? Math.min(lease.expiresAt, tailStart) : lease.expiresAt;
  // By the key's next request for an isolate's lease that a renewal extends; a location holder's
  // stock is renewed half its life ahead, longer than its quiet keys' gaps.
  const nextRequestAt = extendable && stock <= 0 ? now + gapMs : now;
  const ending = nextRequestAt >= renewBy - aheadMs && lease.expiresAt < minuteEnd;
  return halfUsed || ending;
}

/** How long a lease granted to `grantee` (null: an isolate) lives; each ends with its minute anyway. */
export function leaseLifetimeMs(
  grantee: string | null,
  { forTheMinute = false }: { forTheMinute?: boolean } = {},
): number {
  if (grantee === null) return ISOLATE_LEASE_MS;
  return forTheMinute ? MINUTE_MS : STOCK_LEASE_MS;
}

/** Whether a lease granted with `expiresAt`, answered at `answeredAt`, is a stock for the minute. */
export function grantedForTheMinute(expiresAt: number, answeredAt: number): boolean {
  return expiresAt - answeredAt > STOCK_LEASE_MS;
}

/** When a lease of `lifetimeMs` granted at `now` ends: then, or with its minute if sooner. */
export function leaseExpiry(state: UsageState, now: number, lifetimeMs: number): number {
  return Math.min(now + lifetimeMs, state.minuteStart + MINUTE_MS);
}

export interface GrantedLease {
  minuteStart: number;
  dayStart: number;
  permits: number;
}

export function takePermits(state: UsageState, permits: number): UsageState {
  return {
    ...state,
    minuteCount: state.minuteCount + permits,
    dayCount: state.dayCount + permits,
  };
}

/** Gives a lease's unused permits back to the windows it was granted in, if still current. */
export function givePermitsBack(
  state: UsageState,
  lease: GrantedLease,
  unused: number,
): UsageState {
  const n = Math.max(0, Math.min(unused, lease.permits));
  const next = { ...state };
  if (lease.minuteStart === state.minuteStart)
    next.minuteCount = Math.max(0, state.minuteCount - n);
  if (lease.dayStart === state.dayStart) next.dayCount = Math.max(0, state.dayCount - n);
  return next;
}
