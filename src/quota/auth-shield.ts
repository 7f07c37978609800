import { DurableObject } from "cloudflare:workers";
import { clock, MINUTE_MS } from "../clock";
import { UsageStore } from "./usage-store";
import { countFailure, EMPTY_USAGE, type Decision, type UsageState } from "./windows";

/** Failed authentications a client may make per minute before it gets 429. */
const AUTH_FAILURES_PER_MINUTE = 30;

/**
 * One per client IP. Counts failed authentications so API keys cannot be guessed at speed.
 * (The Workers rate-limiting binding cannot do this: it reports neither remaining nor reset.)
 */
export class AuthShield extends DurableObject<Env> {
  readonly #store: UsageStore;
  #usage: UsageState;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new UsageStore(ctx.storage.sql);
    this.#usage = this.#store.load();
  }

  recordFailure(): Decision {
    const now = clock.now();
    const { state, decision } = countFailure(this.#usage, AUTH_FAILURES_PER_MINUTE, now);
    if (state !== this.#usage) {
      const newWindow = state.minuteStart !== this.#usage.minuteStart;
      this.#usage = state;
      this.#store.save(state);
      // Once per window, not per failure: the alarm deletes the row after the window.
      if (newWindow) {
        this.ctx.storage.setAlarm(state.minuteStart + 2 * MINUTE_MS).catch((err: unknown) =>
          console.error(JSON.stringify({ level: "error", msg: "could not schedule shield cleanup", error: String(err) })),
        );
      }
    }
    return decision;
  }

  override async alarm(): Promise<void> {
    if (clock.now() >= this.#usage.minuteStart + MINUTE_MS) {
      this.#store.clear();
      this.#usage = { ...EMPTY_USAGE };
    }
  }
}
