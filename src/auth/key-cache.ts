import { KEY_RECORD_MAX_AGE_MS, type KeyMatch, secretStatus } from "../db/keys";
import { ExpiringMap } from "../lib/expiring-map";
import { CHANGE_APPLIES_WITHIN_MS } from "../quota/lease";

// Warm keys authenticate without a D1 read. The cache may be briefly stale; that is safe because
// the key's quota object holds the authoritative plan and revocation (objects/quota-limiter.ts),
// and when that object cannot be reached the key is re-read from D1
// (middleware/enforce-quota.ts).
//
// An entry is used for at most TTL_MS. From REFRESH_AFTER_MS on, the first request that uses it
// also starts one re-read in the background (after its response, in waitUntil), so a key in
// steady use is re-read every ~25 s without any request waiting for D1; only a key idle for the
// last 5 s of its entry's life waits for a read.
export const KEY_CACHE_TTL_MS = KEY_RECORD_MAX_AGE_MS;
export const KEY_REFRESH_AFTER_MS = 25_000;
// A record that refuses the key (disabled, expired, revoked, a rolled-out secret) is answered
// from the cache without asking the key's object, so no newer version reaches it: it is kept
// half of CHANGE_APPLIES_WITHIN_MS only, because an operator can enable the key or clear its
// expiry from another isolate (the location holder this isolate asks next trusts its own
// refusing copy the other half, objects/holder-key-record.ts).
export const REFUSED_KEY_CACHE_TTL_MS = CHANGE_APPLIES_WITHIN_MS / 2;

/** A re-read not settled after this long is taken as lost (its request's waitUntil cut short). */
export const REFRESH_GIVEN_UP_AFTER_MS = 10_000;

interface Entry {
  match: KeyMatch;
  refreshAt: number;
}

const entries = new ExpiringMap<string, Entry>(10_000);
/** When each background re-read in flight in this isolate started (one per key at a time). */
const refreshing = new Map<string, number>();
// Bumped by every forgetKey (of any key): a re-read that started before one is not stored.
// Coarse on purpose: a forget is rare, and the next request past the refresh time reads again.
let generation = 0;

/** Whether a re-read of `hash` is in flight and not yet taken as lost. */
const refreshInFlight = (hash: string, now: number): boolean => {
  const startedAt = refreshing.get(hash);
  return startedAt !== undefined && now - startedAt < REFRESH_GIVEN_UP_AFTER_MS;
};

interface CachedKey {
  match: KeyMatch;
  /** The entry is old enough to be re-read (and no re-read is in flight yet). */
  wantsRefresh: boolean;
}

export function cachedKey(hash: string, now: number): CachedKey | undefined {
  const entry = entries.get(hash, now);
  if (!entry) return undefined;
  return {
    match: entry.match,
    wantsRefresh: now >= entry.refreshAt && !refreshInFlight(hash, now),
  };
}

/**
 * Caches `match` at `now`, read from D1 at `readAt` (earlier when a location holder handed over
 * its copy): a usable record is kept until KEY_CACHE_TTL_MS after its read at most.
 */
export function cacheKey(hash: string, match: KeyMatch, now: number, readAt = now): void {
  const until =
    secretStatus(match, now) === "active"
      ? Math.min(readAt + KEY_CACHE_TTL_MS, usableUntil(match))
      : now + REFUSED_KEY_CACHE_TTL_MS;
  entries.set(hash, { match, refreshAt: now + KEY_REFRESH_AFTER_MS }, until);
}

/**
 * When the secret that found `match` stops being usable as time passes (the key's expiry, or a
 * rolled secret's grace period ending). A usable entry ends then, and the key is read again
 * rather than refused from the cache: an operator may have moved the expiry later, or cleared it,
 * from another isolate.
 */
function usableUntil(match: KeyMatch): number {
  const { expiresAt, previousSecretExpiresAt } = match.record;
  const graceEnd = match.secret === "previous" ? previousSecretExpiresAt : null;
  return Math.min(expiresAt ?? Number.POSITIVE_INFINITY, graceEnd ?? Number.POSITIVE_INFINITY);
}

/**
 * Re-reads a cached key with `read` (meant to run after the response): stores what it finds,
 * drops the entry if the key is gone, and keeps the old entry if the read fails (the next
 * request past the refresh time tries again; the entry still ends at its TTL). A record read
 * before a `forgetKey` is not stored, so an admin change made here is not undone by a re-read
 * that started before it.
 */
export async function refreshCachedKey(
  hash: string,
  read: () => Promise<KeyMatch | null>,
  now: () => number,
): Promise<void> {
  const startedAt = now();
  if (refreshInFlight(hash, startedAt)) return;
  refreshing.set(hash, startedAt);
  const startedIn = generation;
  try {
    const match = await read();
    if (generation !== startedIn) return;
    if (match) cacheKey(hash, match, now());
    else entries.delete(hash);
  } finally {
    if (refreshing.get(hash) === startedAt) refreshing.delete(hash);
  }
}

/** Drops a key from this isolate's cache (after an admin change, or when its object says revoked). */
export function forgetKey(id: string): void {
  generation++;
  entries.deleteWhere((entry) => entry.match.record.id === id);
}
