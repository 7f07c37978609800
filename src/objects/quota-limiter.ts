import { DurableObject } from "cloudflare:workers";
import { recordBanEnd, recordBanStart } from "../db/audit";
import { type RevisedUsageDay, saveUsageDays, type UsageDay } from "../db/usage-history";
import { clock, DAY_MS, MINUTE_MS } from "../lib/clock";
import { configOrThrow } from "../lib/config";
import { log } from "../lib/log";
import { withDeadline } from "../quota/call-coordination";
import {
  givePermitsBack,
  leaseExpiry,
  leaseLifetimeMs,
  permitsToLease,
  takePermits,
} from "../quota/lease";
import type {
  Admission,
  Lease,
  LeaseRequest,
  Renewal,
  RenewalRequest,
  ReturnedLease,
} from "../quota/lease-messages";
import {
  decide,
  EMPTY_USAGE,
  type KeyDecision,
  type Policy,
  rollWindows,
  type UsageState,
  windowsOf,
} from "../quota/windows";
import { migrateSchema } from "./schema-migrations";
import {
  CREATE_USAGE_HISTORY_TABLE,
  CREATE_USAGE_REVISIONS_TABLE,
  CREATE_USAGE_STRANDED_TABLE,
  UsageHistoryTable,
} from "./usage-history-table";
import { CREATE_USAGE_TABLE, UsageTable } from "./usage-table";

const CREATE_POLICY_TABLE = `CREATE TABLE IF NOT EXISTS policy (
  id INTEGER PRIMARY KEY CHECK (id = 1), per_minute INTEGER NOT NULL, per_day INTEGER NOT NULL,
  version INTEGER NOT NULL, revoked INTEGER NOT NULL) STRICT`;

// Idempotency records lived here until they moved to D1 (migrations/0004); version 1 created the
// table, version 3 drops it. Kept verbatim because version 1 must stay as shipped.
const CREATE_IDEMPOTENCY_TABLE = `CREATE TABLE IF NOT EXISTS idempotency (
  idem_key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, created_at INTEGER NOT NULL,
  claimed_at INTEGER NOT NULL, status INTEGER, body TEXT, location TEXT) STRICT`;

/**
 * The object's storage schema, oldest first; append to change it (never edit a shipped entry).
 * Version 1 is the schema objects had before versioning, hence IF NOT EXISTS.
 */
export const QUOTA_LIMITER_MIGRATIONS = [
  [CREATE_USAGE_TABLE, CREATE_IDEMPOTENCY_TABLE, CREATE_POLICY_TABLE].join(";\n"),
  // 2: admission leases granted and not yet given back (see quota/lease.ts). IF NOT EXISTS
  // because an object whose version row is missing re-runs every migration from the first.
  `CREATE TABLE IF NOT EXISTS leases (
    id TEXT PRIMARY KEY, minute_start INTEGER NOT NULL, day_start INTEGER NOT NULL,
    permits INTEGER NOT NULL, expires_at INTEGER NOT NULL) STRICT`,
  // 3: idempotency records moved to D1 (migrations/0004_idempotency_records.sql).
  "DROP TABLE IF EXISTS idempotency",
  // 4: per-day totals for the usage history (see usage-history-table.ts).
  CREATE_USAGE_HISTORY_TABLE,
  // 5: bans D1 has not fully heard of yet: their start (start_written 0) or their end (the row
  // goes once D1 has both). See #recordBans.
  `CREATE TABLE IF NOT EXISTS ban_records (
    banned_until INTEGER PRIMARY KEY, started_at INTEGER NOT NULL,
    start_written INTEGER NOT NULL DEFAULT 0) STRICT`,
  // 6: leases with the most permits each may still hold unused (see heldBound in
  // quota/lease.ts). Re-created rather than altered, so that re-running every migration (a
  // missing version row) still works. Leases live seconds; one dropped here is never credited
  // back, its permits stay counted until its minute ends.
  `DROP TABLE IF EXISTS leases;
  CREATE TABLE leases (
    id TEXT PRIMARY KEY, minute_start INTEGER NOT NULL, day_start INTEGER NOT NULL,
    permits INTEGER NOT NULL, expires_at INTEGER NOT NULL, held INTEGER NOT NULL) STRICT`,
  // 7: the revision of each held day's totals, so D1 keeps the latest (usage-history-table.ts).
  CREATE_USAGE_REVISIONS_TABLE,
  // 8: the location holder a lease was granted to (null: an isolate), told of changes to the key.
  "ALTER TABLE leases ADD COLUMN grantee TEXT",
  // 9: how many of a lease's permits the usage history counts as served so far (see
  // #settleLease). Leases granted before were counted whole at grant. Re-running every
  // migration stays safe: version 6 re-creates the table without the column.
  `ALTER TABLE leases ADD COLUMN counted INTEGER NOT NULL DEFAULT 0;
  UPDATE leases SET counted = permits`,
  // 10: per day, leased permits never reported used (see usage-history-table.ts).
  CREATE_USAGE_STRANDED_TABLE,
] as const;

/** How long a change to the key waits for the location holders it is pushed to. */
export const PUSH_DEADLINE_MS = 2_000;

/** A held day as the history reports it (without its day start and revision). */
const usageDayOf = ({ day, admitted, refused, stranded }: RevisedUsageDay): UsageDay => ({
  day,
  admitted,
  refused,
  stranded,
});

/**
 * A lease not handed back this long after its expiry (and not before its minute ends) is settled
 * as stranded (see #settleLease). Its holder hands it back within GIVE_BACK_GRACE_MS of the
 * expiry, or with its next call. Under a minute, so every lease of a day is settled by the
 * day-end flush (a minute after the day).
 */
export const STRANDED_AFTER_MS = 30_000;

/** A lease as the object keeps it: when it was granted and what the history counts of it. */
type LeaseRow = {
  id: string;
  minuteStart: number;
  dayStart: number;
  permits: number;
  /** Permits the usage history counts as served so far. */
  counted: number;
};

/** `n` within 0…`most`. */
const clampTo = (most: number, n: number): number => Math.max(0, Math.min(most, n));

/** How soon the object tries again when D1 did not take a finished day's totals. */
const USAGE_FLUSH_RETRY_MS = 5 * MINUTE_MS;

const NO_LEASE: LeaseRequest = { want: 0, returning: [] };

export interface KeyUsage {
  policy: Policy | null;
  minute: { count: number; limit: number | null; resetAt: number };
  day: { count: number; limit: number | null; resetAt: number };
  bannedUntil: number | null;
}

/** What the key's object reports at `now` for its `state` under `policy` (null: none known yet). */
export function keyUsageOf(state: UsageState, policy: Policy | null, now: number): KeyUsage {
  const u = rollWindows(state, now);
  const [minute, day] = windowsOf(u, policy ?? { perMinute: 0, perDay: 0 });
  return {
    policy,
    minute: { count: u.minuteCount, limit: policy?.perMinute ?? null, resetAt: minute!.resetAt },
    day: { count: u.dayCount, limit: policy?.perDay ?? null, resetAt: day!.resetAt },
    bannedUntil: u.bannedUntil > now ? u.bannedUntil : null,
  };
}

/**
 * One per API key (named by the key's id). `admit` both enforces and counts; a busy isolate
 * also gets a lease of permits with it and admits from the lease without calling
 * (quota/lease-holder.ts), so not every request reaches the object. The object also keeps
 * the key's current policy
 * (limits and revocation), pushed by the admin API, so plan changes and revocations take
 * effect on the next request even while Workers still hold a cached key record.
 */
export class QuotaLimiter extends DurableObject<Env> {
  readonly #usageTable: UsageTable;
  readonly #usageHistory: UsageHistoryTable;
  #usage: UsageState = { ...EMPTY_USAGE };
  #policy: Policy | null = null;
  /** The earliest alarm a call asked for and storage failed to set (see #wakeNoLaterThan). */
  #alarmOwed: number | null = null;
  /** The last alarm change asked for (see #alarmNoLaterThan). */
  #alarmChange: Promise<void> = Promise.resolve();
  /** How long a ban lasts (BAN_MINUTES). */
  readonly #banMs: number;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#usageTable = new UsageTable(ctx.storage.sql);
    this.#usageHistory = new UsageHistoryTable(ctx.storage.sql);
    this.#banMs = configOrThrow(env).BAN_MINUTES * MINUTE_MS;
    ctx.blockConcurrencyWhile(async () => {
      migrateSchema(ctx.storage, QUOTA_LIMITER_MIGRATIONS);
      this.#usage = this.#usageTable.load();
      const row = ctx.storage.sql
        .exec<{ perMinute: number; perDay: number; version: number; revoked: number }>(
          "SELECT per_minute AS perMinute, per_day AS perDay, version, revoked FROM policy WHERE id = 1",
        )
        .toArray()[0];
      this.#policy = row ? { ...row, revoked: row.revoked === 1 } : null;
      // Whatever this object holds for later (the day's windows, history days not yet in D1,
      // leases to settle, bans to record) has an alarm, unless setting it failed before the
      // object was evicted: then it gets one now, and the alarm re-arms for what is not due.
      if (this.#holdsWorkForLater() && (await ctx.storage.getAlarm()) === null)
        await ctx.storage.setAlarm(clock.now());
    });
  }

  #holdsWorkForLater(): boolean {
    return (
      this.ctx.storage.sql
        .exec<{ held: number }>(
          `SELECT EXISTS (SELECT 1 FROM usage) OR EXISTS (SELECT 1 FROM usage_history)
              OR EXISTS (SELECT 1 FROM leases) OR EXISTS (SELECT 1 FROM ban_records) AS held`,
        )
        .one().held === 1
    );
  }

  /**
   * Decides and counts one request; first takes back the caller's returned lease, and when the
   * request is admitted with room to spare, grants the lease asked for (counted as used here,
   * in the same synchronous step). `policy` is the caller's view of the key; a newer stored one
   * wins.
   */
  admit(
    policy: Policy,
    request: LeaseRequest = NO_LEASE,
    grantee: string | null = null,
  ): Admission {
    const now = clock.now();
    const effective = this.#adopt(policy);
    const previousDay = this.#usage.dayStart;
    let usage = rollWindows(this.#usage, now);
    for (const returned of request.returning) usage = this.#takeBack(usage, returned);
    const decided = decide(usage, effective, now, this.#banMs);
    let { state } = decided;
    const { decision } = decided;
    let lease: Lease | null = null;
    // Most requests ask for no lease: they need not read what the leases hold.
    const permits =
      decision.outcome === "allowed" && request.want > 0
        ? permitsToLease(decision.windows, effective, request.want, 0, this.#heldBy(state))
        : 0;
    if (permits > 0) {
      lease = this.#grantLease(state, permits, now, grantee);
      state = takePermits(state, permits);
    }
    const banStarted = state.bannedUntil > now && state.bannedUntil !== this.#usage.bannedUntil;
    this.#keep(state, previousDay);
    if (banStarted) this.#noteBan(now, state.bannedUntil);
    // The history counts this request; a lease's permits only as their holder reports them used
    // (see #settleLease), while the windows count them from the grant.
    this.#countInHistory(decision.outcome, now, 1);
    this.#strandUnreportedLeases(now);
    return { ...decision, lease };
  }

  /**
   * Grants a busy isolate more permits on the lease it is still using, admitting no request, so
   * that its requests never wait for this object while the key stays busy. The permits are
   * counted as used now, like a lease's; the isolate then holds at most a tenth of the
   * per-minute limit unused (`holding` included). The lease is extended (more permits, a later
   * expiry) when it was granted in the current minute, else a new one is granted.
   */
  renewLease(policy: Policy, request: RenewalRequest, grantee: string | null = null): Renewal {
    const now = clock.now();
    const effective = this.#adopt(policy);
    const previousDay = this.#usage.dayStart;
    let state = rollWindows(this.#usage, now);
    for (const returned of request.returning) state = this.#takeBack(state, returned);
    if (request.used !== undefined) this.#countUsed(request.leaseId, request.used);
    const windows = windowsOf(state, effective);
    // A caller on an older policy than the object's is told so and granted nothing: its lease
    // was granted under the old limits and must end, not grow.
    const refused =
      effective.revoked || state.bannedUntil > now || effective.version > policy.version;
    const holding = Math.max(0, request.holding);
    const permits = refused
      ? 0
      : permitsToLease(
          windows,
          effective,
          request.want,
          holding,
          this.#heldBy(state, request.leaseId),
        );
    let granted: Lease | null = null;
    if (permits > 0) {
      granted =
        this.#extendLease(request.leaseId, state, permits, holding, now, grantee) ??
        this.#grantLease(state, permits, now, grantee);
      state = takePermits(state, permits);
    }
    this.#keep(state, previousDay);
    this.#strandUnreportedLeases(now);
    return { policyVersion: effective.version, revoked: effective.revoked, windows, granted };
  }

  /**
   * The most permits the current minute's leases may hold unused (leaving out lease `except`):
   * each lease's last known holding plus what was granted to it since. A lease counts until it
   * is handed back, used up or not, and so does one whose holder went away, until its minute
   * ends: what leases hold unused never exceeds heldBound, whatever happens to the holders.
   */
  #heldBy(state: UsageState, except = ""): number {
    const row = this.ctx.storage.sql
      .exec<{ held: number }>(
        `SELECT COALESCE(SUM(held), 0) AS held FROM leases
           WHERE minute_start = ? AND day_start = ? AND id != ?`,
        state.minuteStart,
        state.dayStart,
        except,
      )
      .toArray()[0];
    return row?.held ?? 0;
  }

  /**
   * Records a new lease of `permits` (the caller counts them in the windows), granted to the
   * location holder named `grantee` (null: an isolate).
   */
  #grantLease(state: UsageState, permits: number, now: number, grantee: string | null): Lease {
    const expiresAt = leaseExpiry(state, now, leaseLifetimeMs(grantee));
    const lease = { id: crypto.randomUUID(), permits, expiresAt };
    this.ctx.storage.sql.exec(
      `INSERT INTO leases (id, minute_start, day_start, permits, expires_at, held, grantee)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      lease.id,
      state.minuteStart,
      state.dayStart,
      permits,
      lease.expiresAt,
      permits,
      grantee,
    );
    return lease;
  }

  /**
   * Adds `permits` to lease `id` and pushes its expiry out, if it was granted in the current
   * minute window and not handed back (a give-back then credits all of its unused permits);
   * null otherwise. The lease then holds at most `holding` (its holder's unused) + `permits`.
   */
  #extendLease(
    id: string,
    state: UsageState,
    permits: number,
    holding: number,
    now: number,
    grantee: string | null,
  ): Lease | null {
    const expiresAt = leaseExpiry(state, now, leaseLifetimeMs(grantee));
    const extended = this.ctx.storage.sql.exec(
      `UPDATE leases SET permits = permits + ?, expires_at = ?, held = MIN(held, ?) + ?
         WHERE id = ? AND minute_start = ? AND day_start = ?`,
      permits,
      expiresAt,
      holding,
      permits,
      id,
      state.minuteStart,
      state.dayStart,
    ).rowsWritten;
    return extended > 0 ? { id, permits, expiresAt } : null;
  }

  /** Saves the windows if they changed; schedules the day's cleanup when a new day began. */
  #keep(state: UsageState, previousDay: number): void {
    if (state !== this.#usage) {
      this.#usage = state;
      this.#usageTable.save(state);
    }
    // Once a day per active key: an alarm after the day ends deletes the stale row.
    if (state.dayStart !== previousDay)
      this.#wakeNoLaterThan(
        state.dayStart + DAY_MS + MINUTE_MS,
        "could not schedule usage cleanup",
      );
    const owed = this.#alarmOwed;
    if (owed !== null) {
      this.#alarmOwed = null;
      this.#wakeNoLaterThan(owed, "could not schedule an alarm owed since an earlier failure");
    }
  }

  /**
   * Asks for an alarm no later than `at`, without waiting for storage. A failure is logged as
   * `failure` and kept: the object's next request, renewal or hand-back asks again, so a key
   * still in use is not left without its day's cleanup, history write or ban record.
   */
  #wakeNoLaterThan(at: number, failure: string): void {
    this.#alarmNoLaterThan(at).catch((err: unknown) => {
      this.#alarmOwed = Math.min(at, this.#alarmOwed ?? at);
      log("error", failure, { error: String(err) });
    });
  }

  /**
   * Takes back a lease's unused permits (a holder whose lease expired before its next request).
   * Like a request, it may move the windows into a new day (after the cleanup, or a day with no
   * request yet), so their row gets that day's cleanup alarm too.
   */
  returnLease(returned: ReturnedLease): void {
    const now = clock.now();
    // A lease settled already (handed back before, or stranded) changes nothing and writes
    // nothing: a retried hand-back reaching an idle object leaves it idle.
    const row = this.#leaseRow(returned.id);
    if (row) {
      const previousDay = this.#usage.dayStart;
      this.#keep(this.#settleReturned(rollWindows(this.#usage, now), row, returned), previousDay);
    }
    this.#strandUnreportedLeases(now);
  }

  /**
   * Settles a returned lease once: the history counts what was used of it, the windows get the
   * rest back, and its row goes, so a repeated return is a no-op.
   */
  #takeBack(usage: UsageState, returned: ReturnedLease): UsageState {
    const row = this.#leaseRow(returned.id);
    return row ? this.#settleReturned(usage, row, returned) : usage;
  }

  /** #takeBack for the lease's row, read already. */
  #settleReturned(usage: UsageState, row: LeaseRow, returned: ReturnedLease): UsageState {
    const used = clampTo(
      row.permits,
      returned.used ?? row.permits - clampTo(row.permits, returned.unused),
    );
    this.#settleLease(row, used, 0);
    return givePermitsBack(usage, row, row.permits - used);
  }

  #leaseRow(id: string): LeaseRow | undefined {
    return this.ctx.storage.sql
      .exec<LeaseRow>(
        `SELECT id, minute_start AS minuteStart, day_start AS dayStart, permits, counted
           FROM leases WHERE id = ?`,
        id,
      )
      .toArray()[0];
  }

  /**
   * The usage history counts a lease's permits as served only once its holder reports them used
   * (a renewal, a hand-back); never at grant. So a lease's row is its account: `counted` is what
   * the history counts of it so far. A renewal's report raises it (#countUsed); a hand-back
   * settles it (the history then counts exactly what was used, the rest is credited back); a
   * lease not handed back within STRANDED_AFTER_MS of its expiry is settled as stranded: its
   * permits not reported used are counted apart, never as admitted. See docs/quotas.md (Billing).
   */
  #settleLease(row: LeaseRow, used: number, stranded: number): void {
    this.ctx.storage.sql.exec("DELETE FROM leases WHERE id = ?", row.id);
    // Negative only for a lease granted before the history counted leases as served (counted
    // whole at grant): its unused permits come off.
    this.#countServed(row.dayStart, used - row.counted);
    if (stranded > 0 && this.#usageHistory.strand(row.dayStart, stranded)) {
      this.#scheduleDayFlush(row.dayStart);
    }
  }

  /** Counts a renewing holder's report that `used` of lease `id` have been admitted. */
  #countUsed(id: string, used: number): void {
    const row = this.#leaseRow(id);
    if (!row) return;
    const counted = Math.max(row.counted, clampTo(row.permits, used));
    if (counted === row.counted) return;
    this.ctx.storage.sql.exec("UPDATE leases SET counted = ? WHERE id = ?", counted, id);
    this.#countServed(row.dayStart, counted - row.counted);
  }

  /** Adds `requests` served from leases (negative: takes them off) to the day at `dayStart`. */
  #countServed(dayStart: number, requests: number): void {
    if (requests > 0) this.#countInHistory("allowed", dayStart, requests);
    else this.#usageHistory.uncountAdmitted(dayStart, -requests);
  }

  /**
   * Settles every lease not handed back within STRANDED_AFTER_MS of its expiry, once its minute
   * is over, as stranded: the history keeps what its holder reported used, the rest is stranded.
   * Its permits stay counted in the windows, as the holder may have used them; and until its
   * minute ends the lease still counts towards heldBound (#heldBy), as one handed back would not.
   */
  #strandUnreportedLeases(now: number): void {
    const rows = this.ctx.storage.sql
      .exec<LeaseRow>(
        `SELECT id, minute_start AS minuteStart, day_start AS dayStart, permits, counted
           FROM leases WHERE expires_at <= ? AND minute_start <= ?`,
        now - STRANDED_AFTER_MS,
        now - MINUTE_MS,
      )
      .toArray();
    for (const row of rows) this.#settleLease(row, row.counted, row.permits - row.counted);
  }

  /**
   * Stores a newer policy (plan change, new limits, revocation, disabling) pushed by the admin
   * API, and tells every location holder holding a lease of the key to stop admitting from it:
   * they forward the key's next requests here, where the new policy applies. Waits for them at
   * most PUSH_DEADLINE_MS; a holder not reached stops on its own when its lease ends (STOCK_LEASE_MS).
   */
  async configure(policy: Policy): Promise<void> {
    const before = this.#policy?.version;
    if (this.#adopt(policy).version === before) return;
    const now = clock.now();
    const grantees = this.ctx.storage.sql
      .exec<{ grantee: string }>(
        `SELECT DISTINCT grantee FROM leases
           WHERE grantee IS NOT NULL AND minute_start = ? AND expires_at > ?`,
        now - (now % MINUTE_MS),
        now,
      )
      .toArray()
      .map((row) => row.grantee);
    const keyId = this.ctx.id.name;
    if (!keyId || grantees.length === 0) return;
    const pushes = Promise.all(
      grantees.map((name) =>
        this.env.QUOTA_HOLDER.getByName(name)
          .keyChanged(keyId)
          .catch((err: unknown) =>
            log("warn", "could not tell a location holder of a change to its key", {
              keyId,
              holder: name,
              error: String(err),
            }),
          ),
      ),
    );
    // Each push logs its own failure, so only the deadline rejects: past it, configure answers.
    await withDeadline(pushes, PUSH_DEADLINE_MS).catch(() => undefined);
  }

  /** Current counts and ban. `offered` (the key as D1 has it) supplies limits the object has not seen yet. */
  usage(offered?: Policy): KeyUsage {
    const policy =
      this.#policy && (!offered || this.#policy.version >= offered.version)
        ? this.#policy
        : (offered ?? null);
    return keyUsageOf(this.#usage, policy, clock.now());
  }

  /**
   * The key's own view of itself (GET /v1/usage): current usage and ban, and the days held here
   * (today, and any finished day D1 has not taken yet). Counts no request; it only settles the
   * leases past their deadline first, so stranded permits show as soon as they are due.
   */
  report(offered?: Policy): { usage: KeyUsage; days: UsageDay[] } {
    this.#strandUnreportedLeases(clock.now());
    return {
      usage: this.usage(offered),
      days: this.#usageHistory.days().map(usageDayOf),
    };
  }

  /** Lifts the ban; returns when it would have ended (for the audit) and the usage after it. */
  unban(offered?: Policy): { bannedUntilBefore: number | null; usage: KeyUsage } {
    const bannedUntilBefore = this.usage(offered).bannedUntil;
    // Nothing to lift (an idle key's object holds no row): write none, as nothing would remove it.
    if (this.#usage.bannedUntil !== 0 || this.#usage.minuteRejected !== 0) {
      this.#usage = { ...this.#usage, bannedUntil: 0, minuteRejected: 0 };
      this.#usageTable.save(this.#usage);
    }
    // The operator's unban is audited (and clears D1's ban) by the admin API: no ban_end follows.
    this.ctx.storage.sql.exec("DELETE FROM ban_records");
    return { bannedUntilBefore, usage: this.usage(offered) };
  }

  /**
   * Keeps storage bounded: the usage row goes once its day (and any ban) is over, so an idle key
   * holds nothing. Re-arms while the row remains.
   */
  override async alarm(): Promise<void> {
    const now = clock.now();
    this.#strandUnreportedLeases(now);
    let nextUsageCleanup: number | null = null;
    if (this.#usage.dayStart !== 0) {
      const idleFrom = Math.max(this.#usage.bannedUntil, this.#usage.dayStart + DAY_MS);
      if (now >= idleFrom) {
        this.#usageTable.clear();
        this.#usage = { ...EMPTY_USAGE };
      } else {
        nextUsageCleanup = idleFrom + MINUTE_MS;
      }
    }
    if (nextUsageCleanup !== null) await this.#alarmNoLaterThan(nextUsageCleanup);
    await this.#flushFinishedDays(now);
    await this.#recordBans(now);
  }

  // ---------------------------------------------------------------- bans in D1 and the audit
  // A ban starts here, on the request that earns it; D1 hears of it from the alarm (never from
  // the request, which must not wait for D1): the key's banned_until and a `ban` entry by
  // `system`, then at its end a `ban_end` entry. Each write is idempotent, so a failed one is
  // simply tried again later.

  /** Keeps a new ban for D1 and wakes the alarm now to write it. */
  #noteBan(now: number, bannedUntil: number): void {
    this.ctx.storage.sql.exec(
      "INSERT OR IGNORE INTO ban_records (banned_until, started_at) VALUES (?, ?)",
      bannedUntil,
      now,
    );
    this.#wakeNoLaterThan(now, "could not schedule the ban's record");
  }

  /** Writes the bans' starts and the ends that have come; re-arms for the next end or a retry. */
  async #recordBans(now: number): Promise<void> {
    const keyId = this.ctx.id.name;
    const rows = this.ctx.storage.sql
      .exec<{ until: number; startedAt: number; startWritten: number }>(
        "SELECT banned_until AS until, started_at AS startedAt, start_written AS startWritten FROM ban_records",
      )
      .toArray();
    if (!rows.length || !keyId) return;
    let next = Number.POSITIVE_INFINITY;
    for (const row of rows) {
      try {
        if (!row.startWritten) {
          await recordBanStart(this.env.DB, keyId, row);
          this.ctx.storage.sql.exec(
            "UPDATE ban_records SET start_written = 1 WHERE banned_until = ?",
            row.until,
          );
        }
        if (row.until > now) {
          next = Math.min(next, row.until);
          continue;
        }
        await recordBanEnd(this.env.DB, keyId, row.until);
        this.ctx.storage.sql.exec("DELETE FROM ban_records WHERE banned_until = ?", row.until);
      } catch (err) {
        log("warn", "could not record a ban in D1; retrying", { keyId, error: String(err) });
        next = Math.min(next, now + USAGE_FLUSH_RETRY_MS);
      }
    }
    if (next !== Number.POSITIVE_INFINITY) await this.#alarmNoLaterThan(next);
  }

  // ---------------------------------------------------------------- usage history
  // Per UTC day: requests admitted, and refused by reason. The current day is read live from
  // here; finished days go to D1 (key_usage_days) from the alarm after the day ends, and every
  // day held goes there whenever the history is read. A day is forgotten here only once D1 has
  // it.

  /**
   * Writes the days held here (today, and any finished day D1 has not taken yet) to D1, and
   * returns them; a D1 failure is logged, not thrown.
   */
  async saveUsageHistory(): Promise<UsageDay[]> {
    this.#strandUnreportedLeases(clock.now());
    const days = this.#usageHistory.days();
    await this.#saveToDatabase(days).catch((err: unknown) =>
      log("warn", "could not write usage history to D1", { error: String(err) }),
    );
    return days.map(usageDayOf);
  }

  /** Counts `requests` decisions with `outcome` in the history of the day starting at `at`'s day. */
  #countInHistory(outcome: KeyDecision["outcome"], at: number, requests: number): void {
    if (requests <= 0) return;
    const dayStart = at - (at % DAY_MS);
    if (this.#usageHistory.count(outcome, dayStart, requests)) this.#scheduleDayFlush(dayStart);
  }

  /** A new day in the history: makes sure an alarm after its end writes it to D1. */
  #scheduleDayFlush(dayStart: number): void {
    this.#wakeNoLaterThan(
      dayStart + DAY_MS + MINUTE_MS,
      "could not schedule the usage history write",
    );
  }

  /**
   * Writes the finished days to D1 and forgets them here; if D1 fails, keeps them and tries
   * again later. A day whose leases are not all settled yet (the alarm came before their
   * deadline) waits for them.
   */
  async #flushFinishedDays(now: number): Promise<void> {
    const today = now - (now % DAY_MS);
    const open = this.ctx.storage.sql
      .exec<{ dayStart: number | null; expiresAt: number | null }>(
        "SELECT MIN(day_start) AS dayStart, MIN(expires_at) AS expiresAt FROM leases WHERE day_start < ?",
        today,
      )
      .one();
    if (open.expiresAt !== null) await this.#alarmNoLaterThan(open.expiresAt + STRANDED_AFTER_MS);
    const flushBefore = open.dayStart ?? today;
    const finished = this.#usageHistory.days().filter((d) => d.dayStart < flushBefore);
    if (!finished.length) return;
    try {
      await this.#saveToDatabase(finished);
      // Nothing changes a finished day during the write: its leases, the only thing that could
      // still count on it, are all settled (#strandUnreportedLeases, as the alarm began).
      this.#usageHistory.forgetDaysBefore(flushBefore);
    } catch (err) {
      log("warn", "could not write finished usage days to D1; retrying", { error: String(err) });
      await this.#alarmNoLaterThan(now + USAGE_FLUSH_RETRY_MS);
    }
  }

  async #saveToDatabase(days: RevisedUsageDay[]): Promise<void> {
    const keyId = this.ctx.id.name;
    if (!keyId) throw new Error("the quota object has no name (key id)");
    await saveUsageDays(this.env.DB, keyId, days);
  }

  /**
   * Moves the alarm to `at` if it is not set for earlier. One change at a time, each reading the
   * alarm the previous one left: a call that asks for two alarms (today's cleanup and an earlier
   * one owed) keeps the earlier.
   */
  #alarmNoLaterThan(at: number): Promise<void> {
    const change = this.#alarmChange.then(async () => {
      const current = await this.ctx.storage.getAlarm();
      if (current === null || current > at) await this.ctx.storage.setAlarm(at);
    });
    this.#alarmChange = change.catch(() => undefined);
    return change;
  }

  #adopt(offered: Policy): Policy {
    if (this.#policy && this.#policy.version >= offered.version) return this.#policy;
    this.#policy = offered;
    this.ctx.storage.sql.exec(
      `INSERT INTO policy (id, per_minute, per_day, version, revoked) VALUES (1, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET per_minute = excluded.per_minute, per_day = excluded.per_day,
         version = excluded.version, revoked = excluded.revoked`,
      offered.perMinute,
      offered.perDay,
      offered.version,
      offered.revoked ? 1 : 0,
    );
    return offered;
  }
}
