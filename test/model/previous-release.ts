// The previous release (PREVIOUS_RELEASE, e67c1c3), as far as the quota model can run it: its
// QuotaLimiter schema and the statements its object runs (test/fixtures/previous-release/, copied
// verbatim from its source), and the messages its isolates and location holders send. After a
// rollback it answers at the key's object: each time it opens the storage this release migrated
// as its constructor does (its own migrateSchemaOrThrow with its schema, which refuses a contract
// version past the one it reads through and applies its additions not yet applied; then the
// windows, the policy and the check for work held for later, with its own statements), and
// answers as its QuotaLimiter does: `admit` (the admission id remembered, a minute that has just
// started counting the standing permits granted for it, a lease and standing permits lent on
// top), `renewLease` (the renewal id remembered, `used` counted, the lease extended or a new one,
// standing permits for a location holder: its StandingLedger.lend, six minutes to come each
// within heldBound), `returnLease` and `returnLeases` (its LeaseLedger.takeBack and the admission
// ids reported counted once, its AdmissionMemory.countOnceFromStock), each settling the leases
// past their deadline as stranded; a roll forward opens the object with this release's code again.
import { runInDurableObject } from "cloudflare:test";
import { DAY_MS, MINUTE_MS } from "../../src/lib/clock";
import { newAdmissionId } from "../../src/quota/lease-messages";
import type { Limits } from "../../src/quota/plans";
import {
  decide,
  EMPTY_USAGE,
  type KeyDecision,
  rollWindows,
  type UsageState,
  type WindowStatus,
  windowsOf,
} from "../../src/quota/windows";
import {
  type PreviousQuery,
  QUOTA_LIMITER_QUERIES,
  USAGE_TABLE_QUERIES,
} from "../fixtures/previous-release/queries";
import {
  PREVIOUS_RELEASE,
  QUOTA_LIMITER_SCHEMA as PREVIOUS_SCHEMA,
  migrateSchemaOrThrow as previousMigrateSchemaOrThrow,
} from "../fixtures/previous-release/schemas";

export type Deployed = "current" | "previous";

const statement = (at: string): PreviousQuery => {
  const found = [...USAGE_TABLE_QUERIES, ...QUOTA_LIMITER_QUERIES].find((q) => q.at === at);
  if (!found) throw new Error(`no statement ${at} in the previous release's fixture`);
  return found;
};
const LOAD_USAGE = statement("UsageTable.load");
const SAVE_USAGE = statement("UsageTable.save");
const LOAD_POLICY = statement("KeyPolicy.load");
const HOLDS_WORK = statement("QuotaLimiter#open (holdsWorkForLater)");
const PERMITS_OF_MINUTE = statement("LeaseLedger.sumIn (permits)");
const HELD_IN_MINUTE = statement("LeaseLedger.sumIn (held)");
const GRANT_LEASE = statement("insertLease (LeaseLedger#grant)");
const LEASE_ROW = statement("LeaseLedger#row");
const SETTLE_LEASE = statement("LeaseLedger#settle");
const UNCOUNT_ADMITTED = statement("UsageHistoryTable#uncountAdmitted");
/** The history's count of each outcome the previous release counts (a revoked key's: none). */
const COUNT_OUTCOME = new Map(
  (["allowed", "rate_limited", "quota_exceeded", "key_banned"] as const).map((outcome) => [
    outcome as string,
    statement(`UsageHistoryTable.count (${outcome === "allowed" ? "admitted" : outcome})`),
  ]),
);
const REVISE_DAY = statement("UsageHistoryTable#revise");
const STRAND_DAY = statement("UsageHistoryTable.strand (day)");
const STRAND_PERMITS = statement("UsageHistoryTable.strand (permits)");
const ADOPT_POLICY = statement("KeyPolicy.adopt");
const STANDING_GRANT = statement("insertLease (StandingLedger.lend)");
const LEASE_OF_ANOTHER_OUT = statement("LeaseLedger#leaseOfAnotherOut");
const EXTEND_LEASE = statement("LeaseLedger#extend");
const STANDING_HELD = statement("StandingLedger.lend (held)");
const STANDING_WAITED_FOR = statement("StandingLedger.lend (waited for)");
const LEASE_WAITED_FOR = statement("StandingLedger.lend (the lease waited for)");
const COUNT_USED = statement("LeaseLedger.countUsed");
const OLDEST_MINUTE_OUT = statement("LeaseLedger.oldestMinuteOut");
const STRAND_UNREPORTED = statement("LeaseLedger.strandUnreported");
const REMEMBER = statement("AdmissionMemory.remember");
const RECALL = statement("AdmissionMemory.recall");
const FORGET = statement("AdmissionMemory.forgetOlderThanMemory");

/** What the previous release reads of the key's object when it opens it. */
export interface PreviousView {
  usage: UsageState;
  policy: { perMinute: number; perDay: number; version: number; revoked: boolean } | null;
}

/** A lease the previous release granted (its Lease). */
export interface PreviousLease {
  id: string;
  permits: number;
  expiresAt: number;
}

/** A lease handed back as the previous release's holders and isolates hand one back. */
export interface PreviousReturnedLease {
  id: string;
  unused: number;
  /**
   * Optional in its type (for the release before it), but always sent: its `keepToReturn`
   * defaults a grant never used to `used = 0`, and every other hand-back names its `used`.
   */
  used?: number;
  /** A location holder's: the admission ids of the requests it admitted from it (its idsOf: absent when none). */
  admissionIds?: string[];
}

/** Its StandingPermit: a location holder's permits for the minute starting at `minuteStart`. */
export interface PreviousStandingPermit {
  id: string;
  permits: number;
  minuteStart: number;
}

/** Its LeaseRequest: what an isolate (or a location holder) asks for along with one request. */
export interface PreviousLeaseRequest {
  want: number;
  returning: PreviousReturnedLease[];
  admissionId?: string;
  minuteWant?: number;
  standing?: number;
}

/** Its RenewalRequest. */
export interface PreviousRenewalRequest {
  leaseId: string;
  want: number;
  holding: number;
  returning: PreviousReturnedLease[];
  used?: number;
  admissionIds?: string[];
  renewalId?: string;
  minuteWant?: number;
  standing?: number;
}

/** Its Renewal (the answer to a renewal). */
export interface PreviousRenewal {
  policyVersion: number;
  revoked: boolean;
  windows: WindowStatus[];
  granted: PreviousLease | null;
  now?: number;
  standing?: PreviousStandingPermit[];
}

/** Its Admission. */
export type PreviousAdmission = KeyDecision & {
  lease: PreviousLease | null;
  standing?: PreviousStandingPermit[];
};

/** Its lease sizing and lifetimes (its quota/lease.ts), and its STRANDED_AFTER_MS. */
const ROOM_SHARE = 4;
const LIMIT_SHARE = 10;
const MINUTE_STOCK_ROOM_SHARE = 4;
const ISOLATE_LEASE_MS = 1_750;
const STOCK_LEASE_MS = 4_750;
const STRANDED_AFTER_MS = 30_000;
/** Its quota/standing.ts STANDING_MINUTES, and its lease-messages.ts ADMISSION_MEMORY_MS. */
const STANDING_MINUTES = 6;
const ADMISSION_MEMORY_MS = 60_000;
const ADMISSION_CLOCK_TOLERANCE_MS = 15_000;
const ADMISSION_ID_LIFETIME_MS = 45_000;

/** `n` within 0…`most` (its lease-ledger.ts clampTo). */
const clampTo = (most: number, n: number) => Math.max(0, Math.min(most, n));
const heldBoundOf = (limits: Limits) => Math.max(2, Math.floor(limits.perMinute / LIMIT_SHARE));
const roomOf = (windows: WindowStatus[]) => Math.min(...windows.map((w) => w.remaining));
/** Its permitsToLease, stockLivesTheMinute and standingMinutesFrom. */
function permitsToLease(
  windows: WindowStatus[],
  limits: Limits,
  want: number,
  holding: number,
  heldElsewhere: number,
): number {
  const most = Math.min(
    Math.floor(roomOf(windows) / ROOM_SHARE),
    heldBoundOf(limits) - heldElsewhere - holding,
  );
  return Math.max(0, Math.min(want, most));
}
const stockLivesTheMinute = (windows: WindowStatus[], limits: Limits, permits: number) =>
  roomOf(windows) - permits >= MINUTE_STOCK_ROOM_SHARE * heldBoundOf(limits);
function standingMinutesFrom(now: number): number[] {
  const minute = now - (now % MINUTE_MS);
  const dayEnd = now - (now % DAY_MS) + DAY_MS;
  const out: number[] = [];
  for (let i = 1; i <= STANDING_MINUTES; i++)
    if (minute + i * MINUTE_MS < dayEnd) out.push(minute + i * MINUTE_MS);
  return out;
}
/** Its admissionIdLive: an id that does not say when it was made is decided. */
function admissionIdLive(id: string, now: number): boolean {
  const made = /^([0-9a-z]{1,12})\.[0-9a-f-]{36}$/.exec(id);
  if (!made) return true;
  const at = Number.parseInt(made[1]!, 36);
  return now - at < ADMISSION_ID_LIFETIME_MS && at - now < ADMISSION_CLOCK_TOLERANCE_MS;
}

type Policy = NonNullable<PreviousView["policy"]>;
type LeaseRow = {
  id: string;
  minuteStart: number;
  dayStart: number;
  permits: number;
  counted: number;
};
type Ask = {
  want: number;
  holding: number;
  extending?: string;
  minuteWant?: number;
  standing?: number;
};
type Remembered = Record<string, unknown> & {
  outcome?: string;
  windows?: WindowStatus[];
  standing?: PreviousStandingPermit[];
  fromStock?: true;
};

/**
 * The key's object as the previous release opens it (its QuotaLimiter with its LeaseLedger,
 * StandingLedger, AdmissionMemory, KeyPolicy and UsageHistoryTable, run with its statements):
 * throws, naming the release, when it cannot (its migration list refuses the storage, or its
 * check for work held for later fails). Opened afresh each time, as after an eviction: its
 * in-memory StockSharing is new (a location holder asking is alone), so it asks no holder to
 * share; its alarm, bans and webhooks are left out (they count nothing the model checks), and
 * its standing permits are not drained (STANDING_PERMITS_DRAINED unset).
 */
function openAsPrevious(storage: DurableObjectStorage) {
  const { sql } = storage;
  try {
    previousMigrateSchemaOrThrow(storage, PREVIOUS_SCHEMA);
    sql.exec(HOLDS_WORK.sql).one();
  } catch (err) {
    throw new Error(`${PREVIOUS_RELEASE.slice(0, 7)} cannot open the key's object: ${String(err)}`);
  }
  const load = (): UsageState => ({
    ...EMPTY_USAGE,
    ...(sql.exec(LOAD_USAGE.sql).toArray()[0] as Partial<UsageState> | undefined),
  });
  const row = sql.exec(LOAD_POLICY.sql).toArray()[0] as
    | { perMinute: number; perDay: number; version: number; revoked: number }
    | undefined;
  let policy: Policy | null = row ? { ...row, revoked: row.revoked === 1 } : null;
  let usage = load();
  const sumIn = (column: "held" | "permits", minuteStart: number, dayStart: number, except = "") =>
    sql
      .exec<{ total: number }>(
        (column === "held" ? HELD_IN_MINUTE : PERMITS_OF_MINUTE).sql,
        minuteStart,
        dayStart,
        except,
      )
      .one().total;
  /** The windows at `now` (QuotaLimiter#rolled): a new minute counts its standing permits. */
  const rolled = (now: number): UsageState => {
    const state = rollWindows(usage, now);
    if (state.minuteStart === usage.minuteStart) return state;
    const total = sumIn("permits", state.minuteStart, state.dayStart);
    return total === 0 ? state : { ...state, minuteCount: state.minuteCount + total };
  };
  /** Its #keep: saves the windows when they changed. */
  const keep = (next: UsageState) => {
    if (next === usage) return;
    usage = next;
    sql.exec(
      SAVE_USAGE.sql,
      next.minuteStart,
      next.minuteCount,
      next.minuteRejected,
      next.dayStart,
      next.dayCount,
      next.bannedUntil,
    );
  };
  /** Its UsageHistoryTable.count of `n` requests of `outcome` (a revoked key's: none). */
  const count = (outcome: string, dayStart: number, n: number) => {
    const counted = COUNT_OUTCOME.get(outcome);
    if (!counted || n <= 0) return;
    sql.exec(counted.sql, dayStart, n).toArray();
    sql.exec(REVISE_DAY.sql, dayStart);
  };
  /** Its countServed: `n` served from leases (negative: taken off). */
  const countServed = (dayStart: number, n: number) => {
    if (n > 0) count("allowed", dayStart, n);
    else if (n < 0 && sql.exec(UNCOUNT_ADMITTED.sql, -n, dayStart).rowsWritten > 0)
      sql.exec(REVISE_DAY.sql, dayStart);
  };
  const strand = (dayStart: number, permits: number) => {
    if (permits <= 0) return;
    sql.exec(STRAND_DAY.sql, dayStart);
    sql.exec(STRAND_PERMITS.sql, dayStart, permits);
    sql.exec(REVISE_DAY.sql, dayStart);
  };
  const leaseRow = (id: string) => sql.exec(LEASE_ROW.sql, id).toArray()[0] as LeaseRow | undefined;
  const settle = (r: LeaseRow, used: number, stranded: number) => {
    sql.exec(SETTLE_LEASE.sql, r.id);
    countServed(r.dayStart, used - r.counted);
    strand(r.dayStart, stranded);
  };
  const strandUnreported = (now: number) => {
    const rows = sql
      .exec(STRAND_UNREPORTED.sql, now - STRANDED_AFTER_MS, now - MINUTE_MS)
      .toArray() as LeaseRow[];
    for (const r of rows) settle(r, r.counted, r.permits - r.counted);
  };
  const givePermitsBack = (state: UsageState, lease: LeaseRow, unused: number): UsageState => {
    const n = Math.max(0, Math.min(unused, lease.permits));
    const next = { ...state };
    if (lease.minuteStart === state.minuteStart)
      next.minuteCount = Math.max(0, state.minuteCount - n);
    if (lease.dayStart === state.dayStart) next.dayCount = Math.max(0, state.dayCount - n);
    return next;
  };
  // Its AdmissionMemory (a fresh object forgets on its first answer).
  const recall = (id: string): Remembered | null => {
    const r = sql.exec<{ answer: string }>(RECALL.sql, id).toArray()[0];
    return r ? (JSON.parse(r.answer) as Remembered) : null;
  };
  let forgotAt = 0;
  const remember = (id: string, now: number, answer: object) => {
    sql.exec(REMEMBER.sql, id, now, JSON.stringify(answer));
    if (now - forgotAt < 1_000) return;
    const oldest = sql
      .exec<{ minuteStart: number | null }>(OLDEST_MINUTE_OUT.sql)
      .one().minuteStart;
    const horizon = now - ADMISSION_MEMORY_MS;
    sql.exec(
      FORGET.sql,
      oldest === null ? horizon : Math.min(horizon, oldest - ADMISSION_CLOCK_TOLERANCE_MS),
    );
    forgotAt = now;
  };
  const countOnceFromStock = (
    state: UsageState,
    leaseIn: LeaseRow | null,
    ids: readonly string[] = [],
    now: number,
  ): UsageState => {
    let counted = state;
    for (const id of ids) {
      const known = recall(id);
      if (known?.fromStock) continue;
      const minute = known?.windows?.find((w) => w.name === "minute");
      const day = known?.windows?.find((w) => w.name === "day");
      const decidedHere =
        known?.outcome === "allowed" && minute && day
          ? { minuteStart: minute.resetAt - MINUTE_MS, dayStart: day.resetAt - DAY_MS }
          : null;
      const uncounted = decidedHere ?? (known ? leaseIn : null);
      if (uncounted) {
        counted = givePermitsBack(counted, { id: "", counted: 0, ...uncounted, permits: 1 }, 1);
        countServed(uncounted.dayStart, -1);
      }
      const limits = policy ?? { perMinute: 0, perDay: 0, version: 0, revoked: false };
      const answer = known ?? {
        outcome: "allowed",
        windows: windowsOf(counted, limits),
        now,
        policyVersion: limits.version,
        lease: null,
      };
      remember(id, now, { ...answer, fromStock: true });
    }
    return counted;
  };
  /** Its KeyPolicy.adopt: `offered` stored if newer. */
  const adopt = (offered: Policy): Policy => {
    if (policy && policy.version >= offered.version) return policy;
    policy = offered;
    sql.exec(
      ADOPT_POLICY.sql,
      offered.perMinute,
      offered.perDay,
      offered.version,
      offered.revoked ? 1 : 0,
    );
    return offered;
  };
  /** Its #takeBack: each returned lease settled once, the admissions it reports counted once. */
  const takeBack = (
    state: UsageState,
    returning: readonly PreviousReturnedLease[],
    now: number,
  ): UsageState => {
    let settled = state;
    for (const returned of returning) {
      const r = leaseRow(returned.id) ?? null;
      if (r) {
        const used = clampTo(
          r.permits,
          returned.used ?? r.permits - clampTo(r.permits, returned.unused),
        );
        settle(r, used, 0);
        settled = givePermitsBack(settled, r, r.permits - used);
      }
      settled = countOnceFromStock(settled, r, returned.admissionIds, now);
    }
    return settled;
  };
  /** Its LeaseLedger.lend (a fresh object: a location holder asking is alone). */
  const lendLease = (
    state: UsageState,
    windows: WindowStatus[],
    limits: Limits,
    { want, holding, extending, minuteWant = 0 }: Ask,
    now: number,
    grantee: string | null,
  ): { state: UsageState; lease: PreviousLease | null } => {
    const heldElsewhere = sumIn("held", state.minuteStart, state.dayStart, extending);
    const anotherOut = sql.exec(LEASE_OF_ANOTHER_OUT.sql, grantee).toArray().length > 0;
    const sized = minuteWant > want && grantee !== null && !anotherOut;
    let permits = permitsToLease(
      windows,
      limits,
      sized ? minuteWant : want,
      holding,
      heldElsewhere,
    );
    let forTheMinute = stockLivesTheMinute(windows, limits, permits);
    if (sized && !forTheMinute) {
      permits = permitsToLease(windows, limits, want, holding, heldElsewhere);
      forTheMinute = stockLivesTheMinute(windows, limits, permits);
    }
    if (permits <= 0) return { state, lease: null };
    const lifetime =
      grantee !== null && forTheMinute
        ? MINUTE_MS
        : grantee === null
          ? ISOLATE_LEASE_MS
          : STOCK_LEASE_MS;
    const expiresAt = Math.min(now + lifetime, state.minuteStart + MINUTE_MS);
    const extended =
      extending !== undefined &&
      sql.exec(
        EXTEND_LEASE.sql,
        permits,
        expiresAt,
        holding,
        permits,
        extending,
        state.minuteStart,
        state.dayStart,
      ).rowsWritten > 0;
    const lease = { id: extended ? extending! : crypto.randomUUID(), permits, expiresAt };
    if (!extended)
      sql.exec(
        GRANT_LEASE.sql,
        lease.id,
        state.minuteStart,
        state.dayStart,
        permits,
        expiresAt,
        permits,
        grantee,
      );
    const next = { ...state, minuteCount: state.minuteCount + permits };
    return { state: { ...next, dayCount: state.dayCount + permits }, lease };
  };
  /** Its StandingLedger.lend: the lease asked for, then standing permits for location holder `grantee`. */
  const lend = (
    counted: UsageState,
    windows: WindowStatus[],
    limits: Limits,
    ask: Ask,
    now: number,
    grantee: string | null,
  ): { state: UsageState; lease: PreviousLease | null; standing?: PreviousStandingPermit[] } => {
    const asksLease = ask.want > 0 || ask.extending !== undefined;
    const lent = asksLease
      ? lendLease(counted, windows, limits, ask, now, grantee)
      : { state: counted, lease: null };
    const { state, lease } = lent;
    const permits = ask.standing ?? 0;
    if (grantee === null || permits <= 0) return lent;
    const held = new Set(
      sql
        .exec<{ minuteStart: number }>(STANDING_HELD.sql, grantee, state.minuteStart)
        .toArray()
        .map((r) => r.minuteStart),
    );
    const bound = heldBoundOf(limits);
    const minutes = standingMinutesFrom(now).filter(
      (m) => !held.has(m) && sumIn("held", m, state.dayStart) + permits <= bound,
    );
    const total = permits * minutes.length;
    if (total === 0 || !stockLivesTheMinute(windowsOf(state, limits), limits, total)) return lent;
    const waitedUntil = Math.max(...minutes, ...held) + MINUTE_MS;
    const standing = minutes.map((minuteStart) => ({
      id: crypto.randomUUID(),
      permits,
      minuteStart,
    }));
    sql.exec(
      STANDING_WAITED_FOR.sql,
      waitedUntil,
      grantee,
      state.minuteStart + MINUTE_MS,
      MINUTE_MS,
      waitedUntil,
    );
    for (const s of standing)
      sql.exec(
        STANDING_GRANT.sql,
        s.id,
        s.minuteStart,
        state.dayStart,
        s.permits,
        waitedUntil,
        s.permits,
        grantee,
      );
    if (lease) sql.exec(LEASE_WAITED_FOR.sql, waitedUntil, lease.id);
    return { state: { ...state, dayCount: state.dayCount + total }, lease, standing };
  };
  const stillOut = (standing: PreviousStandingPermit[] | undefined) => {
    const out = standing?.filter((s) => leaseRow(s.id) !== undefined) ?? [];
    return out.length > 0 ? { standing: out } : {};
  };
  /** Its #answered: the windows kept, leases past their deadline stranded, the answer remembered. */
  const answered = <T extends object>(answer: T, state: UsageState, now: number, id?: string) => {
    keep(state);
    strandUnreported(now);
    if (id !== undefined) remember(id, now, answer);
    return answer;
  };
  /** Its QuotaLimiter.admit (the ban's note and the holders' push on a new ban left out). */
  const admit = (
    offered: Policy,
    request: PreviousLeaseRequest,
    grantee: string | null,
    now: number,
  ): PreviousAdmission => {
    const id = request.admissionId;
    const known = id === undefined ? null : recall(id);
    if (known) {
      const { fromStock: _, ...admission } = known;
      const l = admission.lease as PreviousLease | null;
      const lease = l && leaseRow(l.id) ? l : null;
      return {
        ...(admission as unknown as KeyDecision),
        lease,
        ...stillOut(known.standing),
      };
    }
    const effective = adopt(offered);
    const current = takeBack(rolled(now), request.returning, now);
    if (id !== undefined && (effective.version > offered.version || !admissionIdLive(id, now))) {
      const windows = windowsOf(current, effective);
      const stale = { outcome: "stale", windows, now, policyVersion: effective.version } as const;
      return answered({ ...stale, lease: null }, current, now);
    }
    const { decision, state: counted } = decide(current, effective, now, 15 * MINUTE_MS);
    const ask = { ...request, holding: 0 };
    const { state, ...lent } =
      decision.outcome === "allowed"
        ? lend(counted, decision.windows, effective, ask, now, grantee)
        : { state: counted, lease: null };
    count(decision.outcome, state.dayStart, 1);
    return answered<PreviousAdmission>({ ...decision, ...lent }, state, now, id);
  };
  /** Its QuotaLimiter.renewLease. */
  const renewLease = (
    offered: Policy,
    request: PreviousRenewalRequest,
    grantee: string | null,
    now: number,
  ): PreviousRenewal => {
    const id = request.renewalId;
    const known = id === undefined ? null : recall(id);
    if (known) return { ...(known as unknown as PreviousRenewal), ...stillOut(known.standing) };
    const effective = adopt(offered);
    let state = takeBack(rolled(now), request.returning, now);
    if (request.used !== undefined) {
      const r = leaseRow(request.leaseId);
      const counted = r ? Math.max(r.counted, clampTo(r.permits, request.used)) : 0;
      if (r && counted !== r.counted) {
        sql.exec(COUNT_USED.sql, counted, r.id);
        countServed(r.dayStart, counted - r.counted);
      }
    }
    const leaseIn = leaseRow(request.leaseId) ?? null;
    state = countOnceFromStock(state, leaseIn, request.admissionIds, now);
    const windows = windowsOf(state, effective);
    const refused =
      effective.revoked || state.bannedUntil > now || effective.version > offered.version;
    const inThisMinute =
      request.used !== undefined &&
      leaseIn?.minuteStart === state.minuteStart &&
      leaseIn.dayStart === state.dayStart;
    const unusedHere = inThisMinute ? leaseIn.permits - clampTo(leaseIn.permits, request.used!) : 0;
    const holding = Math.max(0, request.holding, unusedHere);
    const ask = { ...request, holding, extending: request.leaseId };
    const {
      state: lentState,
      lease: granted,
      ...standing
    } = refused ? { state, lease: null } : lend(state, windows, effective, ask, now, grantee);
    const { version: policyVersion, revoked } = effective;
    const renewal = { policyVersion, revoked, windows, granted, now, ...standing };
    return answered<PreviousRenewal>(renewal, lentState, now, id);
  };
  /** Its returnLease and returnLeases (a batch's id remembered when it found a lease still out). */
  const returnLeases = (
    now: number,
    returning: readonly PreviousReturnedLease[],
    returnId?: string,
  ) => {
    if (returnId !== undefined) {
      if (recall(returnId)) return;
      if (returning.some((r) => leaseRow(r.id) !== undefined))
        remember(returnId, now, { returned: returning.length });
    }
    const current = rolled(now);
    const settled = takeBack(current, returning, now);
    if (settled !== current) keep(settled);
    strandUnreported(now);
  };
  return { load, policy: () => policy, admit, renewLease, returnLeases };
}
/**
 * Opens the key's object as the previous release does, decides `requests` requests of its
 * isolates (each its admit's message: `{ want, returning: [], admissionId }`, the key's copy
 * the stored policy) at `now` (none: it only opens it), the first asking for a lease of
 * `leaseWant` permits (0: none), and returns what it read first, each decision and the lease.
 * Throws, naming the previous release, when it cannot open the object or a statement fails.
 */
export async function openAndDecideAsPrevious(
  stub: DurableObjectStub,
  now: number,
  requests: number,
  leaseWant = 0,
): Promise<{ opened: PreviousView; decisions: KeyDecision[]; lease: PreviousLease | null }> {
  return runInDurableObject(stub, (_, state) => {
    const object = openAsPrevious(state.storage);
    const policy = object.policy();
    const opened = { usage: object.load(), policy };
    const decisions: KeyDecision[] = [];
    let lease: PreviousLease | null = null;
    if (!policy) return { opened, decisions, lease };
    for (let i = 0; i < requests; i++) {
      const want = i === 0 ? leaseWant : 0;
      const request = { want, returning: [], admissionId: newAdmissionId(now) };
      const { lease: granted, standing: _, ...decision } = object.admit(policy, request, null, now);
      lease ??= granted;
      decisions.push(decision);
    }
    return { opened, decisions, lease };
  });
}

/**
 * Takes `returning` back at `now` as the previous release does: its `returnLeases` (with
 * `returnId`, the batch's id) or its `returnLease` (one lease, no id). Throws as
 * `openAndDecideAsPrevious`.
 */
export async function takeBackAsPrevious(
  stub: DurableObjectStub,
  now: number,
  returning: readonly PreviousReturnedLease[],
  returnId?: string,
): Promise<void> {
  await runInDurableObject(stub, (_, state) => {
    openAsPrevious(state.storage).returnLeases(now, returning, returnId);
  });
}

/**
 * Its `renewLease(policy, request, grantee)` at `now` (grantee: a location holder's name, null
 * for an isolate). Throws as `openAndDecideAsPrevious`.
 */
export async function renewAsPrevious(
  stub: DurableObjectStub,
  now: number,
  policy: Policy,
  request: PreviousRenewalRequest,
  grantee: string | null,
): Promise<PreviousRenewal> {
  return runInDurableObject(stub, (_, state) =>
    openAsPrevious(state.storage).renewLease(policy, request, grantee, now),
  );
}

/** Its `admit(policy, request, grantee)` at `now`. Throws as `openAndDecideAsPrevious`. */
export async function admitAsPrevious(
  stub: DurableObjectStub,
  now: number,
  policy: Policy,
  request: PreviousLeaseRequest,
  grantee: string | null,
): Promise<PreviousAdmission> {
  return runInDurableObject(stub, (_, state) =>
    openAsPrevious(state.storage).admit(policy, request, grantee, now),
  );
}

/** Its location holder's stock (QUIET_STOCK) and the standing permits it asks for at a gap (standingWanted). */
export const PREVIOUS_QUIET_STOCK = 2;
export const previousStandingWanted = (gapMs: number): number =>
  gapMs >= 30_000 ? Math.ceil((0.9 * MINUTE_MS) / gapMs) : 0;
/** Its minuteStockWanted: the requests expected in the rest of the minute at one every `gapMs`. */
export const previousMinuteStockWanted = (now: number, gapMs: number): number =>
  gapMs > 0 ? Math.ceil(Math.max(0, now - (now % MINUTE_MS) + MINUTE_MS - now) / gapMs) : 0;
