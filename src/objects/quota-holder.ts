import { DurableObject } from "cloudflare:workers";
import { type KeyMatch, type KeyRecord, markKeyUsed, policyOf, secretStatus } from "../db/keys";
import { clock } from "../lib/clock";
import { ExpiringMap } from "../lib/expiring-map";
import { logFailure } from "../lib/log";
import type { NoDecision } from "../quota/fail-open";
import {
  ADMISSION_MEMORY_MS,
  type Admission,
  admissionIdLive,
  type LeaseRequest,
  type SharedStock,
} from "../quota/lease-messages";
import type { KeyDecision, Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import { HeldKeyRecord } from "./holder-key-record";
import { LocationStock } from "./holder-stock";

/** A location holder's answer: the decision, or why there is none (NoDecision). */
export type HolderAnswer =
  | { reached: true; decision: KeyDecision; fromStock: boolean }
  | ({ reached: false } & NoDecision);

/**
 * A location holder's answer to a secret of its key: the key and secret, with the decision when
 * asked for and the secret is usable; "unknown": a guess; "unread": the Worker reads D1 itself.
 */
export type HolderAuthentication =
  | { outcome: "found"; match: KeyMatch; answer: HolderAnswer | null; copyAgeMs?: number }
  | { outcome: "unknown" }
  | { outcome: "unread" };

/** The name of the holder of key `keyId` in location `location` (a Cloudflare colo). */
export const holderName = (keyId: string, location: string): string => `${keyId}@${location}`;

/** Per key per location (`holderName`), before the key's QuotaLimiter: never refuses on its own. */
export class QuotaHolder extends DurableObject<Env> {
  readonly #keyRecord = new HeldKeyRecord();
  readonly #stock = new LocationStock(
    this.ctx.storage,
    () => this.env,
    this.ctx.id.name ?? null,
    this.#keyRecord,
  );
  /** The answers to the requests decided here lately, by admission id. */
  readonly #answers = new ExpiringMap<string, Promise<HolderAnswer>>(10_000);

  /** Standing permits kept across an eviction are handed back at their end (LocationStock.alarm). */
  override async alarm(): Promise<void> {
    this.#stock.entered();
    await this.#stock.alarm();
  }

  /** The key whose secret has SHA-256 `hash`, from the copy while vouched for, else from D1. */
  async authenticate(keyId: string, hash: string): Promise<HolderAuthentication> {
    const now = clock.now();
    const kept = this.#keyRecord.vouchedFor(hash, now);
    return kept && this.#keptDecides(kept, now)
      ? { outcome: "found", match: kept, answer: null, copyAgeMs: this.#keyRecord.ageAt(now) }
      : this.#read(keyId, hash);
  }

  /**
   * Whether the copy may answer without a read: one that lets the secret in (the key's object then
   * names any newer version), or one that refuses it read within REFUSING_COPY_TRUSTED_MS.
   */
  #keptDecides(kept: KeyMatch, now: number): boolean {
    return secretStatus(kept, now) === "active" || this.#keyRecord.readJustNow(now);
  }

  /**
   * Authenticates and, when the secret may be used now, decides the request, in one local hop. The
   * copy stays current: every decision asks the key's object or uses its lease (changes are pushed,
   * `keyChanged`), and an answer under a newer version makes it read the key again.
   */
  async authenticateAndAdmit(
    keyId: string,
    hash: string,
    admissionId: string | null = null,
  ): Promise<HolderAuthentication> {
    const now = clock.now();
    const kept = this.#keyRecord.cached(hash, now);
    // A copy too old to be `cached`, at a holder holding standing permits, decides one request as
    // it lets the secret in, and is read again at once (HeldKeyRecord.onceStale).
    const old = kept || !this.#stock.holdsStanding(now) ? null : this.#keyRecord.onceStale(hash);
    const rereading = old && this.#read(keyId, hash);
    const copy = kept ?? old;
    const found: HolderAuthentication =
      copy !== null && (old ? secretStatus(old, now) === "active" : this.#keptDecides(copy, now))
        ? { outcome: "found", match: copy, answer: null, copyAgeMs: this.#keyRecord.ageAt(now) }
        : await this.#read(keyId, hash);
    if (found.outcome !== "found" || secretStatus(found.match, clock.now()) !== "active")
      return found;
    const { record } = found.match;
    const [answer, used] = await Promise.all([
      this.admit(keyId, policyOf(record), record.region, admissionId),
      record.firstUsedAt === null ? this.#markUsed(record) : null,
    ]);
    const match = used ? { ...found.match, record: used } : found.match;
    if (!answer.reached) return { ...found, match, answer };
    const { decision } = answer;
    const undecided = decision.outcome === "stale";
    if (!undecided && decision.outcome !== "revoked" && decision.policyVersion <= record.version) {
      this.#keyRecord.vouch(decision.policyVersion, clock.now());
      return { ...found, match, answer };
    }
    // A stale request (nothing counted) is decided again under the key as D1 has it now, same id;
    // any other decision stands. The old copy's read serves if it found the object's version.
    const begun = undecided && rereading ? await rereading : null;
    const current =
      begun?.outcome === "found" && begun.match.record.version >= decision.policyVersion;
    if (!current) this.#keyRecord.forget();
    const fresh = begun && current ? begun : await this.#read(keyId, hash);
    if (undecided) return fresh.outcome === "found" ? { ...fresh, answer: null } : fresh;
    return { outcome: "found", match: fresh.outcome === "found" ? fresh.match : match, answer };
  }

  /** Marks the key used at its first decision here: D1's record, or null (the Worker does it). */
  async #markUsed(record: KeyRecord): Promise<KeyRecord | null> {
    try {
      const current = await markKeyUsed(this.env.DB, record.id, clock.now());
      if (!current || current.version !== record.version) return null;
      this.#keyRecord.update(current);
      return current;
    } catch (err) {
      logFailure("warn", "a location holder could not mark its key used", err, {
        keyId: record.id,
      });
      return null;
    }
  }

  async #read(keyId: string, hash: string): Promise<HolderAuthentication> {
    try {
      const match = await this.#keyRecord.read(this.env.DB, keyId, hash, clock.now());
      return match ? { outcome: "found", match, answer: null } : { outcome: "unknown" };
    } catch (err) {
      logFailure("warn", "a location holder could not read its key", err, { keyId });
      return { outcome: "unread" };
    }
  }

  /** Decides one request under `policy` (the caller's key); an id decided lately: its answer. */
  admit(
    keyId: string,
    policy: Policy,
    region: Region | null = null,
    admissionId: string | null = null,
  ): Promise<HolderAnswer> {
    this.#stock.entered();
    const now = clock.now();
    this.#readKeyAhead(keyId, now);
    this.#stock.applyRecordedBan(keyId, this.#keyRecord.bannedUntil(), now);
    if (admissionId === null) return this.#stock.decide(keyId, policy, region, null);
    const known = this.#answers.get(admissionId, now);
    if (known) return known;
    if (!admissionIdLive(admissionId, now))
      return this.#stock.askObject(keyId, policy, region, admissionId);
    const answer = this.#stock.decide(keyId, policy, region, admissionId);
    this.#answers.set(admissionId, answer, now + ADMISSION_MEMORY_MS);
    // Only a decision is repeated: a request not decided (the key's object unreachable, or the
    // caller's copy of the key stale) is decided afresh when asked again.
    void answer.then((said) => {
      if (!said.reached || said.decision.outcome === "stale") this.#answers.delete(admissionId);
    });
    return answer;
  }

  /** An isolate's call for a lease, forwarded with this holder's stock. */
  admitForIsolate(
    keyId: string,
    policy: Policy,
    request: LeaseRequest,
    region: Region | null = null,
  ): Promise<Admission> {
    this.#stock.entered();
    return this.#stock.forIsolate(keyId, policy, request, region);
  }

  async giveBack(keyId: string): Promise<void> {
    this.#stock.entered();
    await this.#stock.giveBack(keyId);
  }

  /** The key's policy changed: drops and hands back the stock, and forgets the key's record. */
  async keyChanged(keyId: string): Promise<void> {
    this.#stock.entered();
    this.#keyRecord.forget();
    this.#stock.dropAndHandBack(keyId);
  }

  /** The key's object shares heldBound with another location (LocationStock.restock). */
  async restock(keyId: string): Promise<SharedStock | null> {
    this.#stock.entered();
    return this.#stock.restock(keyId);
  }

  /** Permits in stock or waiting to go back (for tests and the bench). */
  unusedPermits(): number {
    this.#stock.entered();
    return this.#stock.unusedPermits;
  }

  /** Keeps the copy young for the key's next request here (HeldKeyRecord.readAhead). */
  #readKeyAhead(keyId: string, now: number): void {
    this.#keyRecord.readAhead(this.env.DB, keyId, now)?.catch((err: unknown) =>
      // The copy is kept until it is HELD_KEY_MAX_AGE_MS old; the next request reads it then.
      logFailure("warn", "a location holder could not read its key ahead", err, { keyId }),
    );
  }
}
