import type { KeyRecord } from "../db/keys";

// Warm keys authenticate without a D1 read. The cache may be briefly stale; that is safe
// because the key's quota object holds the authoritative plan and revocation (see limiter.ts).
const TTL_MS = 30_000;
const MAX_ENTRIES = 10_000;

const entries = new Map<string, { record: KeyRecord; expiresAt: number }>();

export function cachedKey(hash: string, now: number): KeyRecord | undefined {
  const entry = entries.get(hash);
  if (!entry) return undefined;
  if (entry.expiresAt > now) return entry.record;
  entries.delete(hash);
  return undefined;
}

export function cacheKey(hash: string, record: KeyRecord, now: number): void {
  if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
  entries.set(hash, { record, expiresAt: now + TTL_MS });
}

/** Drops a key from this isolate's cache (after an admin change, or when its object says revoked). */
export function forgetKey(id: string): void {
  for (const [hash, entry] of entries) if (entry.record.id === id) entries.delete(hash);
}
