import { GIVE_BACK_GRACE_MS } from "../quota/lease";
import type { LeaseHolder } from "../quota/lease-holder";
import { STANDING_ALARM_SLACK_MS } from "../quota/standing";
import type { StandingMemory } from "../quota/standing-stock";
import type { Region } from "../schemas/region";
import type { HeldKeyRecord, KeptKeyCopy } from "./holder-key-record";

/** Where a location holder keeps its standing permits across an eviction (`ctx.storage.kv`). */
const STANDING_MEMORY_KEY = "standing";

/**
 * What a holder keeps there: its standing permits and the key's arrivals, whose they are, and its
 * copy of the key (absent: none, or used once stale and not read since, see HeldKeyRecord).
 */
export interface KeptStanding extends StandingMemory {
  keyId: string;
  region: Region | null;
  key?: KeptKeyCopy;
}

/**
 * A standing permit kept across an eviction is used this much less at both ends of its minute:
 * its minute was placed by the clock of the host that held it, which may not be this one.
 */
export const RESTORED_STANDING_MARGIN_MS = 1_000;

/** A hand-back of standing permits that failed is made again by the alarm this long after. */
export const HAND_BACK_RETRY_MS = 5_000;

/**
 * A location holder's standing permits kept in its own storage, so a holder evicted between a
 * sparse key's requests still answers from them: written at each change before what follows
 * leaves (no permit used twice); an alarm after their last minute hands them back if evicted.
 */
export class HolderStandingMemory {
  readonly #storage: DurableObjectStorage;
  readonly #leases: LeaseHolder;
  /** When the alarm is set for (0: none). */
  #alarmAt = 0;
  /** Whether a change could not be written yet (see `keep`). */
  #unwritten = false;
  readonly #keyRecord: HeldKeyRecord;

  constructor(storage: DurableObjectStorage, leases: LeaseHolder, keyRecord: HeldKeyRecord) {
    this.#storage = storage;
    this.#leases = leases;
    this.#keyRecord = keyRecord;
  }

  /** What was kept (this holder was evicted holding standing permits, their alarm set), or null. */
  kept(): KeptStanding | null {
    const kept = this.#storage.kv.get<KeptStanding>(STANDING_MEMORY_KEY) ?? null;
    if (kept) this.#alarmAt = alarmFor(Math.max(0, ...kept.standing.map((s) => s.until)));
    return kept;
  }

  /**
   * Writes the standing permits held (none: deletes them and the alarm). A write from work woken
   * outside the object (only tests' fake timers) is made at the next call (`keepOwed`); any other
   * failure throws: a permit whose use is not written could be used again after an eviction.
   */
  keep(owner: { keyId: string; region: Region | null } | null): void {
    try {
      this.#write(owner);
      this.#unwritten = false;
    } catch (error) {
      if (!isOtherObjectsIo(error)) throw error;
      this.#unwritten = true;
    }
  }

  /** Makes a write `keep` could not make (at the start of each call to the holder). */
  keepOwed(owner: { keyId: string; region: Region | null } | null): void {
    if (this.#unwritten) this.keep(owner);
  }

  #write(owner: { keyId: string; region: Region | null } | null): void {
    const until = this.#leases.standingUntil;
    if (until === 0 || owner === null) {
      this.#storage.kv.delete(STANDING_MEMORY_KEY);
      if (this.#alarmAt !== 0) void this.#storage.deleteAlarm();
      this.#alarmAt = 0;
      return;
    }
    const key = this.#keyRecord.kept();
    const kept: KeptStanding = { ...this.#leases.standingMemory(), ...owner, ...(key && { key }) };
    this.#storage.kv.put(STANDING_MEMORY_KEY, kept);
    const alarmAt = alarmFor(until);
    // Held again, they end RESTORED_STANDING_MARGIN_MS sooner: their alarm is not moved earlier.
    if (alarmAt > this.#alarmAt || alarmAt < this.#alarmAt - RESTORED_STANDING_MARGIN_MS) {
      void this.#storage.setAlarm(alarmAt);
      this.#alarmAt = alarmAt;
    }
  }

  /** When the hand-back of the permits held is due (GIVE_BACK_GRACE_MS after the last one's end). */
  get handBackDueAt(): number {
    return this.#leases.standingUntil + GIVE_BACK_GRACE_MS;
  }

  /** Sets the alarm for `at` (to make a hand-back that failed again; the permits stay kept). */
  retryAt(at: number): void {
    void this.#storage.setAlarm(at);
    this.#alarmAt = at;
  }

  /** Sets the alarm again (it fired before the hand-back was due: later permits were granted). */
  rearm(owner: { keyId: string; region: Region | null }): void {
    this.#alarmAt = 0;
    this.keep(owner);
  }
}

const alarmFor = (until: number) => until + GIVE_BACK_GRACE_MS + STANDING_ALARM_SLACK_MS;

/** workerd's refusal of storage I/O from work another object (or a test) woke. */
const isOtherObjectsIo = (error: unknown): boolean =>
  error instanceof Error && error.message.startsWith("Cannot perform I/O on behalf of a different");
