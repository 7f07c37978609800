import type { KeyMatch } from "../db/keys";
import { ExpiringMap } from "../lib/expiring-map";

// Warm keys authenticate without a D1 read. The cache may be briefly stale; that is safe because
// the key's quota object holds the authoritative plan and revocation (see quota/limiter.ts), and
// when that object cannot be reached the key is re-read from D1 (quota/enforce.ts).
//
// An entry is used for at most TTL_MS. From REFRESH_AFTER_MS on, the first request that uses it
// also starts one re-read in the background (after its response, in waitUntil), so a key in
// steady use is re-read every ~25 s without any request waiting for D1; only a key idle for the
// last 5 s of its entry's life waits for a read.
export const KEY_CACHE_TTL_MS = 30_000;
export const KEY_REFRESH_AFTER_MS = 25_000;

interface Entry {
  match: KeyMatch;
  refreshAt: number;
  /** The forget-generation when the record was read; a refresh older than a forget is dropped. */
  generation: number;
}

const entries = new ExpiringMap<string, Entry>(10_000);
/** Hashes whose background re-read is in flight in this isolate (one per key at a time). */
const refreshing = new Set<string>();
let generation = 0;

export interface CachedKey {
  match: KeyMatch;
  /** The entry is old enough to be re-read (and no re-read is in flight yet). */
  wantsRefresh: boolean;
}

export function cachedKey(hash: string, now: number): CachedKey | undefined {
  const entry = entries.get(hash, now);
  if (!entry) return undefined;
  return { match: entry.match, wantsRefresh: now >= entry.refreshAt && !refreshing.has(hash) };
}

export function cacheKey(hash: string, match: KeyMatch, now: number): void {
  entries.set(
    hash,
    { match, refreshAt: now + KEY_REFRESH_AFTER_MS, generation },
    now + KEY_CACHE_TTL_MS,
  );
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
  if (refreshing.has(hash)) return;
  refreshing.add(hash);
  const startedIn = generation;
  try {
    const match = await read();
    if (generation !== startedIn) return;
    if (match) cacheKey(hash, match, now());
    else entries.delete(hash);
  } finally {
    refreshing.delete(hash);
  }
}

/** Drops a key from this isolate's cache (after an admin change, or when its object says revoked). */
export function forgetKey(id: string): void {
  generation++;
  entries.deleteWhere((entry) => entry.match.record.id === id);
}
