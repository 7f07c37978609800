import type { KeyRecord } from "../db/keys";
import { ExpiringMap } from "../lib/expiring-map";

// Warm keys authenticate without a D1 read. The cache may be briefly stale; that is safe because
// the key's quota object holds the authoritative plan and revocation (see quota/limiter.ts), and
// when that object cannot be reached the key is re-read from D1 (quota/enforce.ts).
const TTL_MS = 30_000;
const entries = new ExpiringMap<string, KeyRecord>(10_000);

export function cachedKey(hash: string, now: number): KeyRecord | undefined {
  return entries.get(hash, now);
}

export function cacheKey(hash: string, record: KeyRecord, now: number): void {
  entries.set(hash, record, now + TTL_MS);
}

/** Drops a key from this isolate's cache (after an admin change, or when its object says revoked). */
export function forgetKey(id: string): void {
  entries.deleteWhere((record) => record.id === id);
}
