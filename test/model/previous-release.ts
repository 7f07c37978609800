// The previous release, as far as the quota model can run it: its QuotaLimiter schema and the
// statements its object runs (test/fixtures/previous-release/, copied verbatim from its source).
// After a rollback it decides the key's requests at the key's object: each time it opens the
// storage this release migrated as its constructor does (its own migrateSchemaOrThrow with its
// schema, which refuses a contract version past the one it reads through and applies its
// additions not yet applied; then the windows, the policy and the check for work held for
// later, with its own statements), decides as its admit does (a minute that has just started
// counts the standing permits granted for it; an isolate's request may be granted a lease on top,
// sized as its LeaseLedger.lend sizes one), takes leases back as its LeaseLedger.takeBack does
// (a hand-back that names no `used`: the permits less those left unused), and writes back with
// its own statements; a roll forward opens the object with this release's schema again.
import { runInDurableObject } from "cloudflare:test";
import { MINUTE_MS } from "../../src/lib/clock";
import {
  decide,
  EMPTY_USAGE,
  type KeyDecision,
  rollWindows,
  type UsageState,
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
}

/** The previous release's lease sizing (its quota/lease.ts: ROOM_SHARE, LIMIT_SHARE, ISOLATE_LEASE_MS). */
const ROOM_SHARE = 4;
const LIMIT_SHARE = 10;
const ISOLATE_LEASE_MS = 1_750;

/** `n` within 0…`most` (its lease-ledger.ts clampTo). */
const clampTo = (most: number, n: number) => Math.max(0, Math.min(most, n));

type Policy = NonNullable<PreviousView["policy"]>;

/**
 * The key's object as the previous release opens it: throws, naming the release, when it cannot
 * (its migration list refuses the storage, or its check for work held for later fails).
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
  const policy: Policy | null = row ? { ...row, revoked: row.revoked === 1 } : null;
  /** The windows at `now` (QuotaLimiter#rolled): a new minute counts its standing permits. */
  const rolled = (now: number): UsageState => {
    const stored = load();
    const state = rollWindows(stored, now);
    if (state.minuteStart === stored.minuteStart) return state;
    const { minuteStart, dayStart } = state;
    const { total } = sql
      .exec<{ total: number }>(PERMITS_OF_MINUTE.sql, minuteStart, dayStart, "")
      .one();
    return { ...state, minuteCount: state.minuteCount + total };
  };
  const save = (next: UsageState) =>
    sql.exec(
      SAVE_USAGE.sql,
      next.minuteStart,
      next.minuteCount,
      next.minuteRejected,
      next.dayStart,
      next.dayCount,
      next.bannedUntil,
    );
  /** Its UsageHistoryTable.count of `n` requests of `outcome` (a revoked key's: none). */
  const count = (outcome: string, dayStart: number, n: number) => {
    const counted = COUNT_OUTCOME.get(outcome);
    if (!counted || n <= 0) return;
    sql.exec(counted.sql, dayStart, n).toArray();
    sql.exec(REVISE_DAY.sql, dayStart);
  };
  return { sql, load, policy, rolled, save, count };
}

/**
 * Its LeaseLedger.lend for an isolate (no grantee), after an admitted request left `state` with
 * `windows`: up to `want` permits, no more than a quarter of the room left nor heldBound less
 * what the minute's other leases hold; counted in both windows at once.
 */
function lendAsPrevious(
  sql: SqlStorage,
  state: UsageState,
  decision: KeyDecision,
  policy: Policy,
  want: number,
  now: number,
): { state: UsageState; lease: PreviousLease | null } {
  const room = Math.min(...decision.windows.map((w) => w.remaining));
  const { total: heldElsewhere } = sql
    .exec<{ total: number }>(HELD_IN_MINUTE.sql, state.minuteStart, state.dayStart, "")
    .one();
  const bound = Math.max(2, Math.floor(policy.perMinute / LIMIT_SHARE));
  const permits = Math.max(0, Math.min(want, Math.floor(room / ROOM_SHARE), bound - heldElsewhere));
  if (permits <= 0) return { state, lease: null };
  const lease = {
    id: crypto.randomUUID(),
    permits,
    expiresAt: Math.min(now + ISOLATE_LEASE_MS, state.minuteStart + MINUTE_MS),
  };
  sql.exec(
    GRANT_LEASE.sql,
    lease.id,
    state.minuteStart,
    state.dayStart,
    permits,
    lease.expiresAt,
    permits,
    null,
  );
  const minuteCount = state.minuteCount + permits;
  return { state: { ...state, minuteCount, dayCount: state.dayCount + permits }, lease };
}

/**
 * Opens the key's object as the previous release does, decides `requests` requests with its
 * statements (at `now`; none: it only opens it), the first granted a lease of up to `leaseWant`
 * permits when admitted (an isolate's request asking for one; 0: none), and returns what it read
 * first, each decision and the lease. Throws, naming the previous release, when it cannot open
 * the object or a statement fails.
 */
export async function openAndDecideAsPrevious(
  stub: DurableObjectStub,
  now: number,
  requests: number,
  leaseWant = 0,
): Promise<{ opened: PreviousView; decisions: KeyDecision[]; lease: PreviousLease | null }> {
  return runInDurableObject(stub, (_, state) => {
    const { sql, load, policy, rolled, save, count } = openAsPrevious(state.storage);
    const opened = { usage: load(), policy };
    const decisions: KeyDecision[] = [];
    let lease: PreviousLease | null = null;
    if (!policy) return { opened, decisions, lease };
    for (let i = 0; i < requests; i++) {
      const { state: counted, decision } = decide(rolled(now), policy, now, 15 * MINUTE_MS);
      let next = counted;
      if (i === 0 && leaseWant > 0 && decision.outcome === "allowed")
        ({ state: next, lease } = lendAsPrevious(sql, counted, decision, policy, leaseWant, now));
      save(next);
      count(decision.outcome, next.dayStart, 1);
      decisions.push(decision);
    }
    return { opened, decisions, lease };
  });
}

/**
 * Takes `returning` back at `now` as the previous release does (QuotaLimiter.returnLeases with
 * LeaseLedger.takeBack): each lease still out settled once, the history counting what was used
 * of it, the windows it was granted in getting the rest back. Throws as `openAndDecideAsPrevious`.
 */
export async function takeBackAsPrevious(
  stub: DurableObjectStub,
  now: number,
  returning: readonly PreviousReturnedLease[],
): Promise<void> {
  await runInDurableObject(stub, (_, state) => {
    const { sql, rolled, save, count } = openAsPrevious(state.storage);
    const current = rolled(now);
    let settled = current;
    for (const returned of returning) {
      const row = sql.exec(LEASE_ROW.sql, returned.id).toArray()[0] as
        | { minuteStart: number; dayStart: number; permits: number; counted: number }
        | undefined;
      if (!row) continue;
      const used = clampTo(
        row.permits,
        returned.used ?? row.permits - clampTo(row.permits, returned.unused),
      );
      sql.exec(SETTLE_LEASE.sql, returned.id);
      const served = used - row.counted;
      if (served > 0) count("allowed", row.dayStart, served);
      else if (served < 0) sql.exec(UNCOUNT_ADMITTED.sql, -served, row.dayStart);
      const back = row.permits - used;
      settled = {
        ...settled,
        minuteCount:
          row.minuteStart === settled.minuteStart
            ? Math.max(0, settled.minuteCount - back)
            : settled.minuteCount,
        dayCount:
          row.dayStart === settled.dayStart
            ? Math.max(0, settled.dayCount - back)
            : settled.dayCount,
      };
    }
    if (settled !== current) save(settled);
  });
}
