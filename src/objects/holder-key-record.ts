import type { Queryable } from "../db/database-error";
import { findKeyByHash, KEY_RECORD_MAX_AGE_MS, type KeyMatch, type KeyRecord } from "../db/keys";
import { clock, MINUTE_MS } from "../lib/clock";
import { CHANGE_APPLIES_WITHIN_MS, STOCK_LEASE_MS } from "../quota/lease";

/** How long a holder uses its copy of the key after reading it from D1, at most. */
export const HELD_KEY_MAX_AGE_MS = KEY_RECORD_MAX_AGE_MS;

/**
 * A holder reads its copy again in the background when it would be this old by the key's next
 * request (at its last gap): a key calling every 10 s to every minute never waits for D1 there.
 */
export const HELD_KEY_READ_AHEAD_AGE_MS = HELD_KEY_MAX_AGE_MS - 5_000;

/** The copy's age, read ahead, when the next request is due: it may come this much late. */
export const HELD_KEY_EXPECTED_AGE_MS = HELD_KEY_MAX_AGE_MS / 2;

/** No read ahead after a gap longer than this: one ends within BACKGROUND_ENDS_WITHIN_MS. */
export const HELD_KEY_READ_AHEAD_GAP_MAX_MS = 2 * MINUTE_MS;

/**
 * How long a copy that refuses the key is trusted after its read (it asks nobody, so no newer
 * version reaches it); an isolate keeps the refusal as long again: CHANGE_APPLIES_WITHIN_MS.
 */
export const REFUSING_COPY_TRUSTED_MS = CHANGE_APPLIES_WITHIN_MS / 2;

/**
 * A location holder's copy of its key's record, and the secrets (by SHA-256 hash) it has met:
 * kept current by the key's object (QuotaHolder.authenticateAndAdmit) for at most
 * HELD_KEY_MAX_AGE_MS; a request the holder does not decide uses it only while vouched for.
 */
export class HeldKeyRecord {
  #record: KeyRecord | null = null;
  readonly #secrets = new Map<string, KeyMatch["secret"]>();
  /** Until when the copy counts as current without asking anyone (see `vouch`). */
  #vouchedUntil = 0;
  #readAt = 0;
  /** The hash of the secret last read (kept by `forget`): what a read ahead reads the key by. */
  #lastHash: string | null = null;
  #lastArrival: number | null = null;
  /** When the copy is next read ahead (0: no read ahead is due). */
  #readAheadAt = 0;
  /** Bumped by `forget`: a read that started before is used for its request, not kept. */
  #generation = 0;
  /** Reads in flight by hash: requests that arrive meanwhile with the same secret share one. */
  readonly #reading = new Map<string, Promise<KeyMatch | null>>();
  /** Whether the copy, too old to be `cached`, decided a request since its read (`onceStale`). */
  #staleUsed = false;
  /** Called after every change to what `kept` returns (the holder writes it to its storage). */
  onChange: (() => void) | null = null;

  /**
   * The key as kept here, if `hash` is one of its secrets, however old the copy: once per read (a
   * holder with standing permits answers a sparse key so, and reads the copy again at once). A
   * change no push brought applies from the second request here at most (docs/quotas.md).
   */
  onceStale(hash: string): KeyMatch | null {
    const secret = this.#secrets.get(hash);
    if (this.#staleUsed || !this.#record || !secret) return null;
    this.#staleUsed = true;
    this.onChange?.();
    return { record: this.#record, secret };
  }

  /** Until when the copy says the key is banned (null: no ban, or no copy), however old it is. */
  bannedUntil(): number | null {
    // A copy kept by the release before has no such field.
    return this.#record?.bannedUntil ?? null;
  }

  /** The copy to keep across an eviction: none once used stale and not read since. */
  kept(): KeptKeyCopy | null {
    if (this.#staleUsed || !this.#record) return null;
    return { record: this.#record, secrets: [...this.#secrets], readAt: this.#readAt };
  }

  /** Holds `copy` again (kept by this holder before it was evicted). */
  restore(copy: KeptKeyCopy): void {
    this.#record = copy.record;
    for (const [hash, secret] of copy.secrets) this.#secrets.set(hash, secret);
    this.#readAt = copy.readAt;
    this.#lastHash = copy.secrets[0]?.[0] ?? null;
  }

  /** The key, if `hash` is a secret met since the copy's read, younger than HELD_KEY_MAX_AGE_MS. */
  cached(hash: string, now: number): KeyMatch | null {
    if (now >= this.#readAt + HELD_KEY_MAX_AGE_MS) return null;
    const secret = this.#secrets.get(hash);
    return this.#record && secret ? { record: this.#record, secret } : null;
  }

  /**
   * Notes a request at `now`, and keeps the copy young for the key's next one (read again by the
   * secret read last, timed by the constants above): the read (rejecting as D1 does), or null.
   */
  readAhead(db: Queryable, keyId: string, now: number): Promise<void> | null {
    const gap = this.#lastArrival === null ? 0 : now - this.#lastArrival;
    this.#lastArrival = now;
    const hash = this.#lastHash;
    if (hash === null || gap <= 0 || gap > HELD_KEY_READ_AHEAD_GAP_MAX_MS) return null;
    if (this.#readAheadAt > now) return null;
    const expected = now + gap;
    // No copy (forgotten after a change): read ahead all the same.
    const age = this.#record ? expected - this.#readAt : Number.POSITIVE_INFINITY;
    if (age < HELD_KEY_READ_AHEAD_AGE_MS) return null;
    const at = Math.max(now, expected - HELD_KEY_EXPECTED_AGE_MS);
    this.#readAheadAt = at;
    return clock.sleep(at - now).then(async () => {
      if (this.#readAheadAt === at) this.#readAheadAt = 0;
      await this.read(db, keyId, hash, clock.now());
    });
  }

  /**
   * The copy's age (since its read began): an isolate it is handed to keeps it only as long as a
   * record it read then, so a change the key's object never learnt reaches both alike.
   */
  ageAt(now: number): number {
    return now - this.#readAt;
  }

  /** Whether the copy was read from D1 within REFUSING_COPY_TRUSTED_MS of `now`. */
  readJustNow(now: number): boolean {
    return this.#record !== null && now < this.#readAt + REFUSING_COPY_TRUSTED_MS;
  }

  /** As `cached`, while the copy is vouched for at `now`. */
  vouchedFor(hash: string, now: number): KeyMatch | null {
    return now < this.#vouchedUntil ? this.cached(hash, now) : null;
  }

  /** The object just decided under `version` (it pushes changes): current STOCK_LEASE_MS more. */
  vouch(version: number, now: number): void {
    if (this.#record?.version === version)
      this.#vouchedUntil = Math.max(this.#vouchedUntil, now + STOCK_LEASE_MS);
  }

  /** Reads key `keyId` by secret hash `hash` from D1 and keeps it (null: a guess). Throws D1's. */
  read(db: Queryable, keyId: string, hash: string, now: number): Promise<KeyMatch | null> {
    let reading = this.#reading.get(hash);
    if (!reading) {
      reading = this.#readOnce(db, keyId, hash, now).finally(() => {
        if (this.#reading.get(hash) === reading) this.#reading.delete(hash);
      });
      this.#reading.set(hash, reading);
    }
    return reading;
  }

  async #readOnce(
    db: Queryable,
    keyId: string,
    hash: string,
    now: number,
  ): Promise<KeyMatch | null> {
    const startedIn = this.#generation;
    const match = await findKeyByHash(db, hash);
    if (!match || match.record.id !== keyId) return null;
    if (startedIn !== this.#generation) return match;
    const kept = this.#record;
    if (kept && match.record.version < kept.version) return match;
    if (!kept || match.record.version > kept.version) {
      // A newer record: the secrets met under the old one may have changed role (a roll).
      this.#secrets.clear();
      this.#vouchedUntil = 0;
    }
    // The same version too: what changes without one (a ban recorded, the first use) is kept.
    this.#record = match.record;
    this.#secrets.set(hash, match.secret);
    this.#lastHash = hash;
    this.#readAt = Math.max(this.#readAt, now);
    this.#staleUsed = false;
    this.vouch(match.record.version, now);
    this.onChange?.();
    return match;
  }

  /** Replaces the copy with `record` when it is the same version (marked used since, say). */
  update(record: KeyRecord): void {
    if (this.#record?.version === record.version) this.#record = record;
  }

  /** Forgets the key (it changed): every secret is read from D1 again when next met. */
  forget(): void {
    this.#generation++;
    this.#reading.clear();
    this.#record = null;
    this.#secrets.clear();
    this.#vouchedUntil = 0;
    this.onChange?.();
  }
}

/** A holder's copy of its key as kept across an eviction (with its standing permits). */
export interface KeptKeyCopy {
  record: KeyRecord;
  secrets: [string, KeyMatch["secret"]][];
  readAt: number;
}
