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

/**
 * A location holder's answer: the decision (from its stock, or forwarded to the key's object),
 * or why there is none (the key's object is overloaded or unreachable from here), with the
 * refusal the holder was last given for the key while it lasts (failing open never admits a
 * key refused in its current window, see quota/fail-open.ts).
 */
export type HolderAnswer =
  | { reached: true; decision: KeyDecision; fromStock: boolean }
  | ({ reached: false } & NoDecision);

/**
 * A location holder's answer to a secret of its key (a key whose token names its id, see
 * auth/key-format.ts): the key and which of its secrets it is, with the decision on the request
 * when one was asked for and the secret may be used now (else null: the Worker says why not);
 * "unknown" when no secret of the key has this hash (a guess); "unread" when the key could not be
 * read here (the Worker reads D1 itself). `copyAgeMs`: how old the copy of the key was (absent: read
 * just now), so that the Worker keeps it no longer than a record it read itself then.
 */
export type HolderAuthentication =
  | { outcome: "found"; match: KeyMatch; answer: HolderAnswer | null; copyAgeMs?: number }
  | { outcome: "unknown" }
  | { outcome: "unread" };

/** The name of the holder of key `keyId` in location `location` (a Cloudflare colo). */
export const holderName = (keyId: string, location: string): string => `${keyId}@${location}`;

/**
 * One per key per location (named by `holderName`): the location tier between the isolates and
 * the key's QuotaLimiter. Isolates in the location send it the requests they cannot decide
 * themselves, over a local hop. It admits them from a stock of permits the key's object leased
 * to it (counted there when granted, so nothing is admitted that was not counted), keeps that
 * stock topped up in the background while the key is used here, and forwards a request to the
 * key's object whenever the stock is out or the key is near its limit: it never refuses on its
 * own, so 429s, Retry-After, the ban and the usage view are the object's. The stock lives in
 * memory, its standing permits in storage too (LocationStock); permits lost with it stay counted
 * (within heldBound, see docs/quotas.md).
 */
export class QuotaHolder extends DurableObject<Env> {
  /** The key's permits held here, and the calls that keep them (see LocationStock). */
  readonly #stock = new LocationStock(this.ctx.storage, () => this.env, this.ctx.id.name ?? null);
  /** The key's record, for requests that arrive with a secret rather than the key (`authenticate`). */
  readonly #keyRecord = new HeldKeyRecord();
  /** The answers to the requests decided here lately, by admission id (see `admit`). */
  readonly #answers = new ExpiringMap<string, Promise<HolderAnswer>>(10_000);

  /** Standing permits kept across an eviction are handed back at their end (LocationStock.alarm). */
  override async alarm(): Promise<void> {
    this.#stock.entered();
    await this.#stock.alarm();
  }

  /**
   * The key whose secret has SHA-256 `hash`, if it is key `keyId`: from this holder's copy while
   * it is vouched for (see HeldKeyRecord), else read from D1 here (in the request's location).
   * No decision is made (GET /v1/usage).
   */
  async authenticate(keyId: string, hash: string): Promise<HolderAuthentication> {
    const now = clock.now();
    const kept = this.#keyRecord.vouchedFor(hash, now);
    return kept && this.#keptDecides(kept, now)
      ? { outcome: "found", match: kept, answer: null, copyAgeMs: this.#keyRecord.ageAt(now) }
      : this.#read(keyId, hash);
  }

  /**
   * Whether the copy `kept` may answer at `now` without a read: one that lets the secret in (the
   * key's object, which every decision asks or leased from, names a newer version), or one that
   * refuses it read within REFUSING_COPY_TRUSTED_MS (it asks nobody, so a key enabled again, or
   * its expiry cleared, with no lease here to push that to, is read again).
   */
  #keptDecides(kept: KeyMatch, now: number): boolean {
    return secretStatus(kept, now) === "active" || this.#keyRecord.readJustNow(now);
  }

  /**
   * Authenticates as `authenticate` does and, when the secret may be used now, decides the
   * request (as `admit` does) under the key's policy as this holder has it: the Worker learns
   * both in one local hop. The copy (read again once HELD_KEY_MAX_AGE_MS old) stays current
   * because the request is decided by the key's object or from its lease: the object pushes every
   * change to the holders holding a lease (`keyChanged`, which forgets the copy), and a holder
   * holding none sends the request to the object, whose answer carries the key's newest version.
   * An answer under a newer version than the copy's (a change that did not reach this holder)
   * makes it read the key again before it answers. The age limit covers a change the object
   * itself never learnt (the admin API's push failed).
   */
  async authenticateAndAdmit(
    keyId: string,
    hash: string,
    admissionId: string | null = null,
  ): Promise<HolderAuthentication> {
    const now = clock.now();
    const kept = this.#keyRecord.cached(hash, now);
    const found: HolderAuthentication =
      kept !== null && this.#keptDecides(kept, now)
        ? { outcome: "found", match: kept, answer: null, copyAgeMs: this.#keyRecord.ageAt(now) }
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
    if (decision.outcome === "stale") {
      // The copy is older than the key's object's policy (a change that did not reach this
      // holder): nothing was counted. The Worker judges the secret by the key as D1 has it now,
      // and has the request decided under it (the same admission id).
      this.#keyRecord.forget();
      const fresh = await this.#read(keyId, hash);
      return fresh.outcome === "found" ? { ...fresh, answer: null } : fresh;
    }
    if (decision.outcome !== "revoked" && decision.policyVersion <= record.version) {
      this.#keyRecord.vouch(decision.policyVersion, clock.now());
      return { ...found, match, answer };
    }
    // The decision stands (the object made it under its newest policy); the Worker judges the
    // secret by the key as D1 has it now.
    this.#keyRecord.forget();
    const fresh = await this.#read(keyId, hash);
    return { outcome: "found", match: fresh.outcome === "found" ? fresh.match : match, answer };
  }

  /**
   * Marks a key D1 has not seen used yet as used (see middleware/first-use.ts) alongside its
   * first decision here, so that the isolates this holder answers need not: the key as D1 now has
   * it, or null when that is a newer version than `record` (the Worker marks it then, and pushes
   * that version to the key's object) or the mark failed (the Worker tries).
   */
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

  /**
   * Decides one request of key `keyId` under `policy` (the caller's view of the key); `region`
   * is where the key's object is created if this holder's call is its first. A request with an
   * `admissionId` this holder decided in the last ADMISSION_MEMORY_MS (its caller lost the
   * answer, or asks again after a cold isolate's authentication here could not answer) gets the
   * same answer, counted once; one forwarded to the key's object carries the id there. One past
   * its lifetime (ADMISSION_ID_LIFETIME_MS), which this holder may have decided and forgotten, is
   * not decided here: the key's object answers it (its decision if it remembers one, else none).
   */
  admit(
    keyId: string,
    policy: Policy,
    region: Region | null = null,
    admissionId: string | null = null,
  ): Promise<HolderAnswer> {
    this.#stock.entered();
    const now = clock.now();
    this.#readKeyAhead(keyId, now);
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

  /** An isolate's call for a lease, forwarded with this holder's stock (LocationStock.forIsolate). */
  admitForIsolate(
    keyId: string,
    policy: Policy,
    request: LeaseRequest,
    region: Region | null = null,
  ): Promise<Admission> {
    this.#stock.entered();
    return this.#stock.forIsolate(keyId, policy, request, region);
  }

  /** Hands the whole stock back now (LocationStock.giveBack). */
  async giveBack(keyId: string): Promise<void> {
    this.#stock.entered();
    await this.#stock.giveBack(keyId);
  }

  /**
   * The key's policy changed (told by the key's object): stops admitting from the stock at once,
   * so the key's next requests here are forwarded to the object, hands the stock back, and
   * forgets the key's record (read again from D1 when next needed).
   */
  async keyChanged(keyId: string): Promise<void> {
    this.#stock.entered();
    this.#keyRecord.forget();
    this.#stock.dropAndHandBack(keyId);
  }

  /**
   * The key's object asks this holder to share the key's heldBound with another location (its
   * stock for the minute holds more than a shared stock): it keeps a shared stock and answers
   * what it gave up; or tells it room freed up for a stock it was refused for that reason: it
   * asks for one, and resolves once that call is answered (see LocationStock.restock).
   */
  async restock(keyId: string): Promise<SharedStock | null> {
    this.#stock.entered();
    return this.#stock.restock(keyId);
  }

  /** Permits in stock or waiting to go back (for tests and the bench). */
  unusedPermits(): number {
    this.#stock.entered();
    return this.#stock.unusedPermits;
  }

  /**
   * Keeps the copy of the key young for the key's next request here (see
   * HeldKeyRecord.readAhead): a cold isolate's request then authenticates from it with no D1 read.
   */
  #readKeyAhead(keyId: string, now: number): void {
    this.#keyRecord.readAhead(this.env.DB, keyId, now)?.catch((err: unknown) =>
      // The copy is kept until it is HELD_KEY_MAX_AGE_MS old; the next request reads it then.
      logFailure("warn", "a location holder could not read its key ahead", err, { keyId }),
    );
  }
}
