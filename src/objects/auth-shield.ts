import { DurableObject } from "cloudflare:workers";
import { clock, MINUTE_MS } from "../lib/clock";
import { log } from "../lib/log";
import { countFailure, type Decision, EMPTY_USAGE, type UsageState } from "../quota/windows";
import { migrateSchemaOrThrow, type ObjectSchema } from "./schema-migrations";
import { openOrThrow } from "./stub-call";
import { CREATE_USAGE_TABLE, UsageTable } from "./usage-table";

export const AUTH_SHIELD_MIGRATIONS = [CREATE_USAGE_TABLE] as const;

export const AUTH_SHIELD_SCHEMA: ObjectSchema = {
  contract: AUTH_SHIELD_MIGRATIONS,
  readsThrough: AUTH_SHIELD_MIGRATIONS.length,
  additions: [],
};

/**
 * One per client IP: counts failed authentications so API keys cannot be guessed at speed (the
 * Workers rate-limiting binding reports neither remaining nor reset).
 */
export class AuthShield extends DurableObject<Env> {
  readonly #usageTable = new UsageTable(this.ctx.storage.sql);
  #usage: UsageState = { ...EMPTY_USAGE };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(() =>
      openOrThrow(() => {
        migrateSchemaOrThrow(ctx.storage, AUTH_SHIELD_SCHEMA);
        this.#usage = this.#usageTable.load();
      }),
    );
  }

  /**
   * Counts one request in the minute window, up to `limit`. Also, named `usage-reads:<key id>`,
   * what keeps a key's GET /v1/usage to its own limit, away from the key's quota object.
   */
  countRequest(limit: number): Decision {
    const now = clock.now();
    const { state, decision } = countFailure(this.#usage, limit, now);
    if (state !== this.#usage) {
      const newWindow = state.minuteStart !== this.#usage.minuteStart;
      this.#usage = state;
      this.#usageTable.save(state);
      // Once per window, not per failure: the alarm deletes the row after the window.
      if (newWindow)
        this.ctx.storage
          .setAlarm(state.minuteStart + 2 * MINUTE_MS)
          .catch((err: unknown) =>
            log("error", "could not schedule shield cleanup", { error: String(err) }),
          );
    }
    return decision;
  }

  override async alarm(): Promise<void> {
    if (clock.now() >= this.#usage.minuteStart + MINUTE_MS) {
      this.#usageTable.clear();
      this.#usage = { ...EMPTY_USAGE };
    }
  }
}
