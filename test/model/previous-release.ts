// The previous release, as far as the quota model can run it: its QuotaLimiter schema and the
// statements its object runs (test/fixtures/previous-release/, copied verbatim from its source).
// After a rollback it decides the key's requests at the key's object: each time it opens the
// storage this release migrated as its constructor does (its own migrateSchemaOrThrow with its
// schema, which refuses a contract version past the one it reads through and applies its
// additions not yet applied; then the windows, the policy and the check for work held for
// later, with its own statements), decides as its admit does (a minute that has just started
// counts the standing permits granted for it), and writes back with its own statements; a roll
// forward opens the object with this release's schema again.
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

/**
 * Opens the key's object as the previous release does, decides `requests` requests with its
 * statements (at `now`; none: it only opens it), and returns what it read first and each
 * decision. Throws, naming the previous release, when it cannot open the object or a statement
 * fails.
 */
export async function openAndDecideAsPrevious(
  stub: DurableObjectStub,
  now: number,
  requests: number,
): Promise<{ opened: PreviousView; decisions: KeyDecision[] }> {
  return runInDurableObject(stub, (_, state) => {
    const { sql } = state.storage;
    try {
      previousMigrateSchemaOrThrow(state.storage, PREVIOUS_SCHEMA);
      sql.exec(HOLDS_WORK.sql).one();
    } catch (err) {
      throw new Error(
        `${PREVIOUS_RELEASE.slice(0, 7)} cannot open the key's object: ${String(err)}`,
      );
    }
    const load = (): UsageState => ({
      ...EMPTY_USAGE,
      ...(sql.exec(LOAD_USAGE.sql).toArray()[0] as Partial<UsageState> | undefined),
    });
    const row = sql.exec(LOAD_POLICY.sql).toArray()[0] as
      | { perMinute: number; perDay: number; version: number; revoked: number }
      | undefined;
    const policy = row ? { ...row, revoked: row.revoked === 1 } : null;
    const opened = { usage: load(), policy };
    const decisions: KeyDecision[] = [];
    if (!policy) return { opened, decisions };
    /** The windows at `now` (QuotaLimiter#rolled): a new minute counts its standing permits. */
    const rolled = (): UsageState => {
      const stored = load();
      const state = rollWindows(stored, now);
      if (state.minuteStart === stored.minuteStart) return state;
      const { minuteStart, dayStart } = state;
      const { total } = sql
        .exec<{ total: number }>(PERMITS_OF_MINUTE.sql, minuteStart, dayStart, "")
        .one();
      return { ...state, minuteCount: state.minuteCount + total };
    };
    for (let i = 0; i < requests; i++) {
      const { state: next, decision } = decide(rolled(), policy, now, 15 * MINUTE_MS);
      sql.exec(
        SAVE_USAGE.sql,
        next.minuteStart,
        next.minuteCount,
        next.minuteRejected,
        next.dayStart,
        next.dayCount,
        next.bannedUntil,
      );
      const counted = COUNT_OUTCOME.get(decision.outcome);
      if (counted) {
        sql.exec(counted.sql, next.dayStart, 1).toArray();
        sql.exec(REVISE_DAY.sql, next.dayStart);
      }
      decisions.push(decision);
    }
    return { opened, decisions };
  });
}
