import { DAY_MS, MINUTE_MS } from "../lib/clock";
import { type GrantedLease, givePermitsBack } from "../quota/lease";
import {
  ADMISSION_CLOCK_TOLERANCE_MS,
  ADMISSION_MEMORY_MS,
  type Admission,
} from "../quota/lease-messages";
import { type UsageState, type WindowStatus, windowsOf } from "../quota/windows";
import type { KeyPolicy } from "./key-policy";
import type { LeaseLedger } from "./lease-ledger";
import type { UsageHistoryTable } from "./usage-history-table";

/** A schema addition (quota-limiter-schema.ts): the answers to the calls that carry an id. */
export const CREATE_ADMISSIONS_TABLE = `CREATE TABLE IF NOT EXISTS admissions (
    id TEXT PRIMARY KEY, decided_at INTEGER NOT NULL, answer TEXT NOT NULL) STRICT;
  CREATE INDEX IF NOT EXISTS admissions_by_time ON admissions (decided_at)`;

/** An admission as remembered; `fromStock`: reported from a stock, counted in lease `countedIn`. */
export type RememberedAdmission = Admission & {
  fromStock?: true;
  countedIn?: string;
  /** The location holder its lease and standing permits were granted to (absent: an isolate). */
  grantee?: string | null;
};

/** Where the windows of `windows` (a decision's) start. */
function windowsStartOf(windows: WindowStatus[]): { minuteStart: number; dayStart: number } | null {
  const minute = windows.find((w) => w.name === "minute");
  const day = windows.find((w) => w.name === "day");
  return minute && day
    ? { minuteStart: minute.resetAt - MINUTE_MS, dayStart: day.resetAt - DAY_MS }
    : null;
}

/** An answer forgets the ids past ADMISSION_MEMORY_MS at most this often (the alarm, the rest). */
const FORGET_EVERY_MS = 1_000;

/**
 * What makes admissions and renewals idempotent at the key's object: an id asked again (a retry,
 * a call delivered twice, a fallback from the holder) gets the same answer, counted once.
 */
export class AdmissionMemory {
  #forgotAt = 0;

  constructor(
    private readonly sql: SqlStorage,
    private readonly history: UsageHistoryTable,
    private readonly policy: KeyPolicy,
    private readonly leases: Pick<LeaseLedger, "oldestMinuteOut">,
  ) {}

  /** The answer given to call `id`, while it is remembered (see `forgetOlderThanMemory`). */
  recall<T>(id: string): T | null {
    const row = this.sql
      .exec<{ answer: string }>("SELECT answer FROM admissions WHERE id = ?", id)
      .toArray()[0];
    return row ? (JSON.parse(row.answer) as T) : null;
  }

  /** Keeps `answer`, given at `now` to call `id`. */
  remember(id: string, now: number, answer: object): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO admissions (id, decided_at, answer) VALUES (?, ?, ?)",
      id,
      now,
      JSON.stringify(answer),
    );
    if (now - this.#forgotAt >= FORGET_EVERY_MS) this.forgetOlderThanMemory(now);
  }

  /**
   * Forgets the ids answered ADMISSION_MEMORY_MS or more before `now`, but not since the minute of
   * a lease still out (less the clock tolerance): a holder's report of one, however late, must find
   * this object's decision of the same id, or the request is counted twice.
   */
  forgetOlderThanMemory(now: number): void {
    const oldestLease = this.leases.oldestMinuteOut();
    const horizon = now - ADMISSION_MEMORY_MS;
    const before =
      oldestLease === null
        ? horizon
        : Math.min(horizon, oldestLease - ADMISSION_CLOCK_TOLERANCE_MS);
    this.sql.exec("DELETE FROM admissions WHERE decided_at <= ?", before);
    this.#forgotAt = now;
  }

  /**
   * Counts once, by admission id, each request a location holder reports it admitted from lease
   * `leaseIn` (null once settled), after the report's `used`: also one the object decided too, or
   * reported twice (docs/quotas.md, "Billing"); any other id is remembered as admitted.
   */
  countOnceFromStock(
    usage: UsageState,
    leaseIn: (GrantedLease & { id: string }) | null,
    admissionIds: readonly string[] = [],
    now: number,
  ): UsageState {
    let counted = usage;
    const seen = new Set<string>();
    const countOff = (lease: Pick<GrantedLease, "minuteStart" | "dayStart">) => {
      counted = givePermitsBack(counted, { ...lease, permits: 1 }, 1);
      this.history.countServed(lease.dayStart, -1);
    };
    for (const id of admissionIds) {
      const repeated = seen.has(id);
      seen.add(id);
      const known = this.recall<RememberedAdmission>(id);
      if (known?.fromStock) {
        const countedElsewhere = known.countedIn !== undefined && known.countedIn !== leaseIn?.id;
        if (leaseIn && (repeated || countedElsewhere)) countOff(leaseIn);
        continue;
      }
      const decidedHere = known?.outcome === "allowed" ? windowsStartOf(known.windows) : null;
      const uncounted = decidedHere ?? (known ? leaseIn : null);
      if (uncounted) countOff(uncounted);
      const limits = this.policy.current ?? { perMinute: 0, perDay: 0, version: 0, revoked: false };
      const answer: RememberedAdmission = known ?? {
        outcome: "allowed",
        windows: windowsOf(counted, limits),
        now,
        policyVersion: limits.version,
        lease: null,
      };
      this.remember(id, now, {
        ...answer,
        fromStock: true,
        ...(leaseIn && { countedIn: leaseIn.id }),
      });
    }
    return counted;
  }
}
