import { DurableObject } from "cloudflare:workers";
import type { UsageDay } from "../db/usage-history";
import { clock, DAY_MS, MINUTE_MS } from "../lib/clock";
import { configOrThrow } from "../lib/config";
import { logFailure } from "../lib/log";
import {
  type Admission,
  admissionIdLive,
  type LeaseRequest,
  type LeaseReturn,
  type Renewal,
  type RenewalRequest,
  type ReturnedLease,
} from "../quota/lease-messages";
import {
  decide,
  EMPTY_USAGE,
  type KeyUsage,
  keyUsageOf,
  type Policy,
  rollWindows,
  type UsageState,
  windowsOf,
} from "../quota/windows";
import { AdmissionMemory, type RememberedAdmission } from "./admission-memory";
import { AlarmSchedule } from "./alarm-schedule";
import { BanRecords } from "./ban-records";
import { KeyPolicy } from "./key-policy";
import { LeaseLedger, STRANDED_AFTER_MS } from "./lease-ledger";
import { holdsWorkForLater, QUOTA_LIMITER_SCHEMA } from "./quota-limiter-schema";
import { migrateSchemaOrThrow } from "./schema-migrations";
import { StandingLedger } from "./standing-ledger";
import { askToShare, tellHoldersOfChange } from "./stock-sharing";
import { openOrThrow } from "./stub-call";
import { UsageHistoryTable } from "./usage-history-table";
import { UsageTable } from "./usage-table";
import { WebhookOutbox } from "./webhook-outbox";

/**
 * One per API key (named by its id): the only counter of the key's windows, and the keeper of its
 * newest policy (pushed by the admin API, so changes apply while Workers cache the key).
 */
export class QuotaLimiter extends DurableObject<Env> {
  readonly #sql = this.ctx.storage.sql;
  readonly #keyId = this.ctx.id.name;
  readonly #db = () => this.env.DB;
  readonly #queue = () => this.env.WEBHOOK_QUEUE;
  readonly #usageTable = new UsageTable(this.#sql);
  readonly #policy = new KeyPolicy(this.#sql);
  readonly #alarms = new AlarmSchedule(this.ctx.storage);
  readonly #history = new UsageHistoryTable(this.#sql, this.#alarms, this.#db, this.#keyId);
  readonly #leases = new LeaseLedger(this.#sql, this.#history);
  readonly #standing = new StandingLedger(this.#sql, this.#leases);
  readonly #bans = new BanRecords(this.#sql, this.#alarms, this.#db, this.#keyId);
  readonly #admissions = new AdmissionMemory(this.#sql, this.#history, this.#policy, this.#leases);
  readonly #webhooks = new WebhookOutbox(this.#sql, this.#alarms, this.#queue, this.#keyId);
  #usage: UsageState = { ...EMPTY_USAGE };
  #banMs = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // Whatever fails here fails every call alike: callers must tell it from an outage.
    ctx.blockConcurrencyWhile(() => openOrThrow(async () => this.#open(ctx, env)));
  }

  async #open(ctx: DurableObjectState, env: Env): Promise<void> {
    this.#banMs = configOrThrow(env).BAN_MINUTES * MINUTE_MS;
    migrateSchemaOrThrow(ctx.storage, QUOTA_LIMITER_SCHEMA);
    this.#usage = this.#usageTable.load();
    this.#policy.load();
    // Setting the alarm may have failed before an eviction: one now, and it re-arms for the rest.
    if (holdsWorkForLater(ctx.storage.sql) && (await ctx.storage.getAlarm()) === null)
      await ctx.storage.setAlarm(clock.now());
  }

  /**
   * Decides and counts one request after taking back the returned leases, and lends what was asked.
   * `policy` is the caller's copy of the key (a newer stored one wins). An admission id is decided
   * once; `stale` (counted nowhere) when sent on an older version than this object's (a roll or
   * the expiry may have changed too), or too late.
   */
  admit(
    policy: Policy,
    request: LeaseRequest = { want: 0, returning: [] },
    grantee: string | null = null,
  ): Admission {
    const now = clock.now();
    const id = request.admissionId;
    const known = id === undefined ? null : this.#admissions.recall<RememberedAdmission>(id);
    // The lease granted with it goes again while it is out (its caller never had it); what the
    // call hands back is taken back all the same (once: a lease settles once).
    if (known) {
      this.#takeBackNow(request.returning);
      const { fromStock: _, countedIn: __, grantee: grantedTo, standing, ...admission } = known;
      // Only to the caller it was granted to: another tier asking the same id (an isolate's
      // fallback from its holder) gets the decision, not the holder's permits. (Remembered by the
      // release before, which kept no grantee: to any caller, as that release did.)
      const theirs = grantedTo === undefined || grantedTo === grantee;
      const out = theirs && known.lease && this.#leases.grantedIn(known.lease.id);
      return {
        ...admission,
        // Now: a caller places what it is given by the answer's time (the lease's time left).
        now,
        lease: out ? known.lease : null,
        ...(theirs ? this.#standing.stillOut(standing) : {}),
        // Its caller may have held and used that lease before (a location holder started again):
        // only a call retried after its first attempt failed takes it (HolderCalls.to).
        repeated: true,
      };
    }
    const effective = this.#policy.adopt(policy);
    const current = this.#takeBack(this.#rolled(now), request.returning, now);
    if (id !== undefined && (effective.version > policy.version || !admissionIdLive(id, now))) {
      const windows = windowsOf(current, effective);
      const stale = { outcome: "stale", windows, now, policyVersion: effective.version } as const;
      return this.#answered({ ...stale, lease: null }, current, now);
    }
    const { decision, state: counted } = decide(current, effective, now, this.#banMs);
    const ask = { ...request, holding: 0 };
    const { state, ...lent } =
      decision.outcome === "allowed"
        ? this.#standing.lend(counted, decision.windows, effective, ask, now, grantee)
        : { state: counted, lease: null };
    if (state.bannedUntil > now && state.bannedUntil !== this.#usage.bannedUntil) {
      this.#bans.note(now, state.bannedUntil);
      // Holders admit from their stock and standing permits without asking: they stop now.
      this.ctx.waitUntil(this.#tellHolders());
    }
    // In the windows' day, which a clock stepping back does not leave (leases: lease-ledger.ts).
    this.#history.count(decision.outcome, state.dayStart, 1);
    return this.#answered<Admission>({ ...decision, ...lent }, state, now, id, { grantee });
  }

  /** More permits on the lease in use (or a new one), no request decided: busy keys never wait. */
  renewLease(
    policy: Policy,
    request: RenewalRequest,
    grantee: string | null = null,
  ): Renewal | Promise<Renewal> {
    // A location holder told others share the bound with it asks now: answered once they have.
    const sharing = this.#leases.sharing.heldFor(grantee);
    const renew = () => this.#renew(policy, request, grantee);
    return sharing ? sharing.then(renew) : renew();
  }

  #renew(policy: Policy, request: RenewalRequest, grantee: string | null): Renewal {
    const now = clock.now();
    const id = request.renewalId;
    const known = id === undefined ? null : this.#admissions.recall<Renewal>(id);
    if (known) {
      const { standing, ...renewal } = known;
      return { ...renewal, now, ...this.#standing.stillOut(standing) };
    }
    const effective = this.#policy.adopt(policy);
    let state = this.#takeBack(this.#rolled(now), request.returning, now);
    if (request.used !== undefined) this.#leases.countUsed(request.leaseId, request.used);
    const leaseIn = this.#leases.grantedIn(request.leaseId);
    state = this.#admissions.countOnceFromStock(state, leaseIn, request.admissionIds, now);
    const windows = windowsOf(state, effective);
    // A caller on an older policy is told so and granted nothing: its lease must end, not grow.
    const refused =
      effective.revoked || state.bannedUntil > now || effective.version > policy.version;
    // A renewal whose answer was lost left permits out that the holder's `holding` leaves out.
    const unusedHere = this.#leases.unusedOf(request.leaseId, state, request.used);
    const holding = Math.max(0, request.holding, unusedHere);
    const ask = { ...request, holding, extending: request.leaseId };
    const lent = refused
      ? { state, lease: null }
      : this.#standing.lend(state, windows, effective, ask, now, grantee);
    const { state: lentState, lease: granted, ...standing } = lent;
    const { version: policyVersion, revoked } = effective;
    const renewal = { policyVersion, revoked, windows, granted, now, ...standing };
    return this.#answered<Renewal>(renewal, lentState, now, id);
  }

  #answered<T extends object>(
    answer: T,
    state: UsageState,
    now: number,
    id?: string,
    rememberedWith: object = {},
  ): T {
    this.#keep(state);
    this.#leases.strandUnreported(now);
    if (id !== undefined) this.#admissions.remember(id, now, { ...answer, ...rememberedWith });
    // A location holder short of a stock only because others hold the bound: they share it.
    const sharing = this.#leases.sharing.take();
    const keyId = this.#keyId;
    if (!sharing || !keyId) return answer;
    const shared = askToShare(this.env.QUOTA_HOLDER, keyId, sharing, (stocks) => {
      const current = this.#rolled(clock.now());
      const state = stocks.reduce((s, stock) => this.#leases.takeShared(s, stock), current);
      if (state !== current) this.#keep(state);
    }).catch((err: unknown) => logFailure("warn", "could not share a key's stock", err, { keyId }));
    this.ctx.waitUntil(shared);
    if (sharing.tellWaiting) return answer;
    this.#leases.sharing.underWay(sharing.waiting, shared);
    return { ...answer, sharing: true };
  }

  /** The windows at `now`: a minute just started counts the standing permits granted for it. */
  #rolled(now: number): UsageState {
    const rolled = rollWindows(this.#usage, now);
    const newMinute = rolled.minuteStart !== this.#usage.minuteStart;
    return newMinute ? this.#standing.countedAsItStarts(rolled) : rolled;
  }

  #takeBack(usage: UsageState, returning: readonly ReturnedLease[], now: number): UsageState {
    let settled = usage;
    for (const returned of returning) {
      const leaseIn = this.#leases.grantedIn(returned.id);
      settled = this.#leases.takeBack(settled, returned) ?? settled;
      settled = this.#admissions.countOnceFromStock(settled, leaseIn, returned.admissionIds, now);
    }
    return settled;
  }

  #keep(state: UsageState): void {
    const newDay = state.dayStart !== this.#usage.dayStart;
    if (state !== this.#usage) {
      this.#webhooks.observe(this.#usage, state, this.#policy.current, clock.now());
      this.#usage = state;
      this.#usageTable.save(state);
    }
    const cleanupAt = state.dayStart + DAY_MS + MINUTE_MS;
    if (newDay) this.#alarms.wakeNoLaterThan(cleanupAt, "could not schedule usage cleanup");
    this.#alarms.askOwed();
  }

  /** Takes back a lease's unused permits (its holder's lease expired before its next request). */
  returnLease(returned: ReturnedLease): void {
    this.#takeBackNow([returned]);
  }

  /** Takes back several leases in one call; the same `returnId` delivered again changes nothing. */
  returnLeases({ returnId, returning }: LeaseReturn): void {
    if (this.#admissions.recall(returnId)) return;
    if (returning.some((r) => this.#leases.grantedIn(r.id) !== null))
      this.#admissions.remember(returnId, clock.now(), { returned: returning.length });
    this.#takeBackNow(returning);
  }

  #takeBackNow(returning: readonly ReturnedLease[]): void {
    const now = clock.now();
    // A lease settled already writes nothing: a retried hand-back leaves an idle object idle.
    const current = this.#rolled(now);
    const settled = this.#takeBack(current, returning, now);
    if (settled !== current) this.#keep(settled);
    this.#leases.strandUnreported(now);
  }

  /** Stores a newer policy pushed by the admin API; holders not told stop as their leases end. */
  async configure(policy: Policy): Promise<void> {
    const before = this.#policy.current?.version;
    if (this.#policy.adopt(policy).version === before) return;
    await this.#tellHolders();
  }

  async #tellHolders(): Promise<void> {
    const grantees = this.#leases.granteesHolding(clock.now());
    if (this.#keyId) await tellHoldersOfChange(this.env.QUOTA_HOLDER, this.#keyId, grantees);
  }

  /** Current counts and ban. `offered` (the key as D1 has it) supplies limits not seen here yet. */
  usage(offered?: Policy): KeyUsage {
    const now = clock.now();
    return keyUsageOf(this.#rolled(now), this.#policy.newest(offered), now);
  }

  /** GET /v1/usage: usage and the days held here, with the leases past their deadline settled. */
  report(offered?: Policy): { usage: KeyUsage; days: UsageDay[] } {
    this.#leases.strandUnreported(clock.now());
    return { usage: this.usage(offered), days: this.#history.days() };
  }

  /** Lifts the ban; returns when it would have ended (for the audit) and the usage after it. */
  unban(offered?: Policy): { bannedUntilBefore: number | null; usage: KeyUsage } {
    const bannedUntilBefore = this.usage(offered).bannedUntil;
    // Nothing to lift (an idle key's object holds no row): write none, as nothing would remove it.
    if (this.#usage.bannedUntil !== 0 || this.#usage.minuteRejected !== 0) {
      this.#usage = { ...this.#usage, bannedUntil: 0, minuteRejected: 0 };
      this.#usageTable.save(this.#usage);
    }
    this.#bans.forget();
    if (bannedUntilBefore !== null) this.#webhooks.banEnded(bannedUntilBefore, clock.now());
    return { bannedUntilBefore, usage: this.usage(offered) };
  }

  /** The usage row goes once its day and ban are over; finished days and bans go to D1. */
  override async alarm(): Promise<void> {
    const now = clock.now();
    this.#leases.strandUnreported(now);
    this.#admissions.forgetOlderThanMemory(now);
    if (this.#usage.dayStart !== 0) {
      const idleFrom = Math.max(this.#usage.bannedUntil, this.#usage.dayStart + DAY_MS);
      if (now >= idleFrom) {
        this.#usageTable.clear();
        this.#usage = { ...EMPTY_USAGE };
      } else {
        await this.#alarms.noLaterThan(idleFrom + MINUTE_MS);
      }
    }
    const today = now - (now % DAY_MS);
    const open = this.#leases.unsettledBefore(today);
    if (open.expiresAt !== null) await this.#alarms.noLaterThan(open.expiresAt + STRANDED_AFTER_MS);
    await this.#history.flushDaysBefore(open.dayStart ?? today, now);
    await this.#bans.record(now);
    await this.#webhooks.send(now);
  }

  /** Writes the days held here to D1 and returns them; a D1 failure is logged, not thrown. */
  async saveUsageHistory(): Promise<UsageDay[]> {
    this.#leases.strandUnreported(clock.now());
    return this.#history.save();
  }
}
