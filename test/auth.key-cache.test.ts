import { describe, expect, it } from "vitest";
import {
  cachedKey,
  cacheKey,
  forgetKey,
  KEY_CACHE_TTL_MS,
  KEY_REFRESH_AFTER_MS,
  REFUSED_KEY_CACHE_TTL_MS,
  refreshCachedKey,
} from "../src/auth/key-cache";
import type { KeyMatch, KeyRecord } from "../src/db/keys";
import { CHANGE_APPLIES_WITHIN_MS } from "../src/quota/lease";
import { T0 } from "./helpers";

let n = 0;
/** A key record of its own for each test (the cache is module state shared by the file). */
function match(overrides: Partial<KeyRecord> = {}): { hash: string; match: KeyMatch } {
  n++;
  const record: KeyRecord = {
    id: `key_cache_${n}`,
    name: "cache",
    prefix: "pet_test_abc",
    plan: "free",
    limits: { perMinute: 60, perDay: 1000 },
    version: 1,
    createdAt: T0,
    updatedAt: T0,
    revokedAt: null,
    expiresAt: null,
    disabledAt: null,
    ownerId: null,
    meta: null,
    rolledAt: null,
    previousSecretExpiresAt: null,
    firstUsedAt: null,
    bannedUntil: null,
    region: null,
    ...overrides,
  };
  return { hash: `hash-${n}`, match: { record, secret: "current" } };
}

/** A read the test settles by hand, to look at the cache while it is in flight. */
function pendingRead() {
  let settle!: { resolve: (m: KeyMatch | null) => void; reject: (e: Error) => void };
  let calls = 0;
  const promise = new Promise<KeyMatch | null>((resolve, reject) => {
    settle = { resolve, reject };
  });
  return {
    read: () => {
      calls++;
      return promise;
    },
    settle,
    calls: () => calls,
  };
}

describe("the isolate's key cache", () => {
  it("asks for a re-read from 25 s on, and ends the entry at 30 s", () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    expect(cachedKey(k.hash, T0 + KEY_REFRESH_AFTER_MS - 1)).toEqual({
      match: k.match,
      wantsRefresh: false,
    });
    expect(cachedKey(k.hash, T0 + KEY_REFRESH_AFTER_MS)?.wantsRefresh).toBe(true);
    expect(cachedKey(k.hash, T0 + KEY_CACHE_TTL_MS - 1)?.match).toBe(k.match);
    expect(cachedKey(k.hash, T0 + KEY_CACHE_TTL_MS)).toBeUndefined();
  });

  it("a re-read stores the record it finds, with a new 30 s; one re-read per key at a time", async () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    const at = T0 + KEY_REFRESH_AFTER_MS;
    const read = pendingRead();
    const first = refreshCachedKey(k.hash, read.read, () => at);
    // While it is in flight nobody else is asked to re-read, and a second call reads nothing.
    expect(cachedKey(k.hash, at)?.wantsRefresh).toBe(false);
    await refreshCachedKey(k.hash, read.read, () => at);
    expect(read.calls()).toBe(1);
    const fresh = { ...k.match, record: { ...k.match.record, plan: "pro" as const } };
    read.settle.resolve(fresh);
    await first;
    expect(cachedKey(k.hash, T0 + KEY_CACHE_TTL_MS)?.match.record.plan).toBe("pro");
    expect(cachedKey(k.hash, at + KEY_CACHE_TTL_MS - 1)?.wantsRefresh).toBe(true);
    expect(cachedKey(k.hash, at + KEY_CACHE_TTL_MS)).toBeUndefined();
  });

  it("a failed re-read keeps the old entry until its end, and the next request may try again", async () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    const at = T0 + KEY_REFRESH_AFTER_MS;
    await expect(
      refreshCachedKey(
        k.hash,
        () => Promise.reject(new Error("D1 down")),
        () => at,
      ),
    ).rejects.toThrow("D1 down");
    expect(cachedKey(k.hash, at)).toEqual({ match: k.match, wantsRefresh: true });
    expect(cachedKey(k.hash, T0 + KEY_CACHE_TTL_MS)).toBeUndefined();
  });

  it("a key that is gone is dropped", async () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    await refreshCachedKey(
      k.hash,
      async () => null,
      () => T0 + KEY_REFRESH_AFTER_MS,
    );
    expect(cachedKey(k.hash, T0 + KEY_REFRESH_AFTER_MS)).toBeUndefined();
  });

  it("a re-read that started before forgetKey does not put the old record back", async () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    const read = pendingRead();
    const refresh = refreshCachedKey(k.hash, read.read, () => T0 + KEY_REFRESH_AFTER_MS);
    forgetKey(k.match.record.id); // an admin change made in this isolate meanwhile
    read.settle.resolve(k.match); // what D1 said before the change
    await refresh;
    expect(cachedKey(k.hash, T0 + KEY_REFRESH_AFTER_MS)).toBeUndefined();
  });

  it("a re-read that never settles does not stop the key's later re-reads", async () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    const at = T0 + KEY_REFRESH_AFTER_MS;
    const lost = pendingRead(); // its request's waitUntil was cut short: it never settles
    void refreshCachedKey(k.hash, lost.read, () => at);
    expect(cachedKey(k.hash, at + 1)?.wantsRefresh).toBe(false); // in flight
    // The entry ends at 30 s; the next request reads the key (blocking) and caches it again.
    const reread = T0 + KEY_CACHE_TTL_MS;
    expect(cachedKey(k.hash, reread)).toBeUndefined();
    cacheKey(k.hash, k.match, reread);
    // 25 s on, that entry asks for a re-read again: the lost one is not waited for forever.
    const due = reread + KEY_REFRESH_AFTER_MS;
    expect(cachedKey(k.hash, due)?.wantsRefresh).toBe(true);
    const next = pendingRead();
    const retried = refreshCachedKey(k.hash, next.read, () => due);
    expect(next.calls()).toBe(1);
    next.settle.resolve(k.match);
    await retried;
    expect(cachedKey(k.hash, due + KEY_CACHE_TTL_MS - 1)?.match).toBe(k.match);
  });

  it("a re-read is taken as lost 10 s after it started, and a lost one settling late leaves the next one's mark alone", async () => {
    const k = match();
    cacheKey(k.hash, k.match, T0);
    const at = T0 + KEY_REFRESH_AFTER_MS;
    const slow = pendingRead();
    const first = refreshCachedKey(k.hash, slow.read, () => at);
    const early = pendingRead();
    const skipped = refreshCachedKey(k.hash, early.read, () => at + 9_999);
    expect(early.calls(), "still in flight at 9.999 s").toBe(0);
    early.settle.resolve(k.match);
    await skipped;
    const second = pendingRead();
    const retried = refreshCachedKey(k.hash, second.read, () => at + 10_000);
    expect(second.calls(), "taken as lost at 10 s").toBe(1);
    slow.settle.resolve(k.match); // the lost one settles after all…
    await first;
    const third = pendingRead();
    const alsoSkipped = refreshCachedKey(k.hash, third.read, () => at + 10_001);
    expect(third.calls(), "…and the second is still the one in flight").toBe(0);
    third.settle.resolve(k.match);
    await alsoSkipped;
    second.settle.resolve(k.match);
    await retried;
  });

  it("keeps a record that refuses the key for 5 s only: an operator can enable a disabled key, or clear an expiry, from another isolate", () => {
    for (const refusing of [{ disabledAt: T0 - 1 }, { expiresAt: T0 - 1 }]) {
      const k = match(refusing);
      cacheKey(k.hash, k.match, T0);
      expect(cachedKey(k.hash, T0 + REFUSED_KEY_CACHE_TTL_MS - 1)).toEqual({
        match: k.match,
        wantsRefresh: false,
      });
      expect(cachedKey(k.hash, T0 + REFUSED_KEY_CACHE_TTL_MS)).toBeUndefined();
    }
    // With the holder's refusing copy (the other half): "within 2 s everywhere".
    expect(REFUSED_KEY_CACHE_TTL_MS).toBe(CHANGE_APPLIES_WITHIN_MS / 2);
    const usable = match({ expiresAt: T0 + 60_000 });
    cacheKey(usable.hash, usable.match, T0);
    expect(cachedKey(usable.hash, T0 + REFUSED_KEY_CACHE_TTL_MS)).toBeDefined();
  });

  it("ends an entry when its secret stops being usable while cached (an expiry or a grace period passing), so the key is read again: the expiry may have been moved later elsewhere", () => {
    const expiring = match({ expiresAt: T0 + 20_000 });
    cacheKey(expiring.hash, expiring.match, T0);
    expect(cachedKey(expiring.hash, T0 + 20_000 - 1)?.match).toBe(expiring.match);
    expect(cachedKey(expiring.hash, T0 + 20_000)).toBeUndefined();
    const graceEnding = match({ previousSecretExpiresAt: T0 + 10_000, rolledAt: T0 - 1 });
    const previous: KeyMatch = { ...graceEnding.match, secret: "previous" };
    cacheKey(graceEnding.hash, previous, T0);
    expect(cachedKey(graceEnding.hash, T0 + 10_000 - 1)?.match).toBe(previous);
    expect(cachedKey(graceEnding.hash, T0 + 10_000)).toBeUndefined();
    // The current secret of that key is not ended by the grace period.
    cacheKey(graceEnding.hash, graceEnding.match, T0);
    expect(cachedKey(graceEnding.hash, T0 + 10_000)?.match).toBe(graceEnding.match);
  });

  it("keeps a record handed over by a location holder until KEY_CACHE_TTL_MS after the holder read it", () => {
    const handed = match();
    cacheKey(handed.hash, handed.match, T0, T0 - 20_000);
    expect(cachedKey(handed.hash, T0 - 20_000 + KEY_CACHE_TTL_MS - 1)?.match).toBe(handed.match);
    expect(cachedKey(handed.hash, T0 - 20_000 + KEY_CACHE_TTL_MS)).toBeUndefined();
  });

  it("forgetKey drops that key's entries only", () => {
    const forgotten = match();
    const kept = match();
    cacheKey(forgotten.hash, forgotten.match, T0);
    cacheKey(kept.hash, kept.match, T0);
    forgetKey(forgotten.match.record.id);
    expect(cachedKey(forgotten.hash, T0)).toBeUndefined();
    expect(cachedKey(kept.hash, T0)?.match).toBe(kept.match);
  });
});
