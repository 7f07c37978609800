import { DurableObject } from "cloudflare:workers";
import { clock, DAY_MS, MINUTE_MS } from "../lib/clock";
import { configOrThrow } from "../lib/config";
import { log } from "../lib/log";
import {
  decide,
  EMPTY_USAGE,
  type KeyDecision,
  type Policy,
  rollWindows,
  type UsageState,
  windowsOf,
} from "../quota/windows";
import {
  type Claim,
  CREATE_IDEMPOTENCY_TABLE,
  IDEMPOTENCY_TTL_MS,
  IdempotencyTable,
  type StoredResponse,
} from "./idempotency-table";
import { migrateSchema } from "./schema-migrations";
import { CREATE_USAGE_TABLE, UsageTable } from "./usage-table";

const CREATE_POLICY_TABLE = `CREATE TABLE IF NOT EXISTS policy (
  id INTEGER PRIMARY KEY CHECK (id = 1), per_minute INTEGER NOT NULL, per_day INTEGER NOT NULL,
  version INTEGER NOT NULL, revoked INTEGER NOT NULL) STRICT`;

/**
 * The object's storage schema, oldest first; append to change it (never edit a shipped entry).
 * Version 1 is the schema objects had before versioning, hence IF NOT EXISTS.
 */
export const QUOTA_LIMITER_MIGRATIONS = [
  [CREATE_USAGE_TABLE, CREATE_IDEMPOTENCY_TABLE, CREATE_POLICY_TABLE].join(";\n"),
] as const;

export interface KeyUsage {
  policy: Policy | null;
  minute: { count: number; limit: number | null; resetAt: number };
  day: { count: number; limit: number | null; resetAt: number };
  bannedUntil: number | null;
}

/**
 * One per API key (named by the key's id). Every API request makes one call here, `admit`,
 * which both enforces and counts (an idempotent create adds two: claim and complete). The
 * object also keeps the key's current policy
 * (limits and revocation), pushed by the admin API, so plan changes and revocations take
 * effect on the next request even while Workers still hold a cached key record.
 */
export class QuotaLimiter extends DurableObject<Env> {
  readonly #usageTable: UsageTable;
  readonly #idempotency: IdempotencyTable;
  #usage: UsageState = { ...EMPTY_USAGE };
  #policy: Policy | null = null;
  /** How long a ban lasts (BAN_MINUTES). */
  readonly #banMs: number;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#usageTable = new UsageTable(ctx.storage.sql);
    this.#idempotency = new IdempotencyTable(ctx.storage.sql);
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
    });
  }

  /** Decides and counts one request. `policy` is the caller's view of the key; a newer stored one wins. */
  admit(policy: Policy): KeyDecision {
    const now = clock.now();
    const effective = this.#adopt(policy);
    const previousDay = this.#usage.dayStart;
    const { state, decision } = decide(this.#usage, effective, now, this.#banMs);
    if (state !== this.#usage) {
      this.#usage = state;
      this.#usageTable.save(state);
    }
    // Once a day per active key: an alarm after the day ends deletes the stale row.
    if (state.dayStart !== previousDay) {
      this.#alarmNoLaterThan(state.dayStart + DAY_MS + MINUTE_MS).catch((err: unknown) =>
        log("error", "could not schedule usage cleanup", { error: String(err) }),
      );
    }
    return decision;
  }

  /** Stores a newer policy (plan change, new limits, revocation) pushed by the admin API. */
  configure(policy: Policy): void {
    this.#adopt(policy);
  }

  /** Current counts and ban. `offered` (the key as D1 has it) supplies limits the object has not seen yet. */
  usage(offered?: Policy): KeyUsage {
    const now = clock.now();
    const u = rollWindows(this.#usage, now);
    const policy =
      this.#policy && (!offered || this.#policy.version >= offered.version)
        ? this.#policy
        : (offered ?? null);
    const [minute, day] = windowsOf(u, policy ?? { perMinute: 0, perDay: 0 });
    return {
      policy,
      minute: { count: u.minuteCount, limit: policy?.perMinute ?? null, resetAt: minute!.resetAt },
      day: { count: u.dayCount, limit: policy?.perDay ?? null, resetAt: day!.resetAt },
      bannedUntil: u.bannedUntil > now ? u.bannedUntil : null,
    };
  }

  /** Lifts the ban and returns the usage after it, in one call. */
  unban(offered?: Policy): KeyUsage {
    this.#usage = { ...this.#usage, bannedUntil: 0, minuteRejected: 0 };
    this.#usageTable.save(this.#usage);
    return this.usage(offered);
  }

  /** Idempotency-Key of a create: proceed, replay the stored answer, or refuse (mismatch, in flight). */
  async claimIdempotencyKey(key: string, fingerprint: string): Promise<Claim> {
    const now = clock.now();
    const claim = this.#idempotency.claim(key, fingerprint, now);
    if (claim.state === "proceed") await this.#alarmNoLaterThan(now + IDEMPOTENCY_TTL_MS);
    return claim;
  }

  completeIdempotencyKey(key: string, response: StoredResponse): void {
    this.#idempotency.complete(key, response);
  }

  releaseIdempotencyKey(key: string): void {
    this.#idempotency.release(key);
  }

  /**
   * Keeps storage bounded: expired idempotency records go, and the usage row goes once its day
   * (and any ban) is over, so an idle key holds nothing. Re-arms for whatever remains.
   */
  override async alarm(): Promise<void> {
    const now = clock.now();
    const nextRecordExpiry = this.#idempotency.purge(now);
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
    const next = Math.min(nextRecordExpiry ?? Infinity, nextUsageCleanup ?? Infinity);
    if (next !== Infinity) await this.ctx.storage.setAlarm(next);
  }

  async #alarmNoLaterThan(at: number): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
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
