// The network between the quota tiers, as the model drives it: every call to a quota object
// (QUOTA, the key's object; QUOTA_HOLDER, a location's holder), from a simulated isolate or from
// inside an object, passes the stub-call boundary here. The model arms faults on it: a call
// held before it reaches its object (delayed; released later, in any order), its answer held
// on its way back, the call delivered twice, or lost before or after the object acted (the
// caller sees a `.retryable` error, as the runtime marks a dropped connection, and retries as
// it does in production). Background work sleeps on a fake clock.sleep and wakes when the
// model moves time. Test-only wiring: the bindings' getByName is spied on, nothing in src
// changes.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type fc from "fast-check";
import { vi } from "vitest";
import { clock } from "../../src/lib/clock";
import { evictIfRunning } from "../helpers";

export type Fault = "holdCall" | "holdAnswer" | "duplicate" | "loseBefore" | "loseAfter";
export type Tier = "object" | "holder";

/** An object making a call. */
export interface Caller {
  tier: Tier;
  name: string;
}

/** A fault armed for the next call to `tier` of method `method`. */
export interface ArmedFault {
  tier: Tier;
  method: string;
  fault: Fault;
}

/** A call between the tiers: to which tier's object, its method and its arguments. */
export interface CallMade {
  tier: Tier;
  method: string;
  args: readonly unknown[];
}

/** A call or an answer held back, released by the model (or when the run heals). */
export interface Held {
  label: string;
  /** What is held: the call before it arrives, or its answer on the way back. */
  part: "call" | "answer";
  call: CallMade;
  /** Fake time when it was held. */
  heldAt: number;
  release: () => void;
  /** The object that made the call (null: an isolate, the test): released in its context. */
  caller: Caller | null;
}

interface Sleep {
  at: number;
  wake: () => void;
  /** The object whose work sleeps (null: an isolate's): woken in its context. */
  caller: Caller | null;
}

/** Timers this long or longer run in fake time (call deadlines); shorter ones are real. */
const DEADLINE_MS = 1_000;

/** How long everything must be quiet, while something is held, to count as settled. */
const QUIET_TASKS = 20;
const QUIET_MS = 40;
/**
 * The same while calls wait only at a scheduler's gates: shorter, as the scheduler is asked for
 * the next one at every step (a call still on its way is then offered at a later step).
 */
const GATE_QUIET_TASKS = 4;

/**
 * Real time one step of a run (a command, a scheduled round, a phase of the run's end) may take
 * before the run counts as stuck: steps take well under a second, and a step that waits for
 * something that can never happen (a call held that nothing releases, a sleep that time never
 * reaches) fails the run with what is waiting, instead of hanging it.
 */
export const STUCK_AFTER_MS = 15_000;

const realTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const nextTask = () => new Promise<void>((resolve) => realTimeout(resolve, 0));

/** What the runtime throws for a dropped connection: retried once on a fresh stub. */
export function droppedConnection(label: string): Error {
  return Object.assign(new Error(`network: connection lost (${label})`), { retryable: true });
}

/** Calls the model makes that are not part of the protocol it explores (reads, setup). */
const UNFAULTED = new Set(["usage", "report", "unusedPermits", "configure"]);

/** The model's own reads: never ordered by a scheduler (they run between its steps). */
const MODEL_READS = new Set(["usage", "report", "unusedPermits"]);

/** A call or an answer waiting for a scheduler to let it go on (see `scheduleCalls`). */
interface Gate {
  label: string;
  caller: Caller | null;
  open: () => void;
}

export class Network {
  readonly armed: ArmedFault[] = [];
  readonly held: Held[] = [];
  readonly sleeping: Sleep[] = [];
  /** Faults that fired, in order (for the counterexample's story). */
  readonly fired: string[] = [];
  /** The calls lost before they reached their object, in order (a retry is a call of its own). */
  readonly lostBefore: CallMade[] = [];
  #inFlight = 0;
  /** Calls started or ended (a call that ends may let others go on). */
  #events = 0;
  /** Each run's calls are its own: work left over from an earlier run is never counted again. */
  #generation = 0;
  #uncounted = new Map<object, (name: string) => unknown>();
  #now: () => number;
  #callerOf: (() => Caller | null) | null = null;
  /** Calls and answers wait at gates for a scheduler (see `scheduleCalls`). */
  #scheduling = false;
  /** Gates not yet offered to the scheduler. */
  readonly #gates: Gate[] = [];
  /** Calls and answers waiting at gates, offered or not. */
  #atGates = 0;
  /** Gates the scheduler let go, being opened in their callers' context. */
  readonly #opening = new Set<Promise<void>>();
  /** Gates offered to a scheduler and not yet let go (for `describe`). */
  readonly #offered = new Set<string>();
  /** Each call of this run not yet answered, and where it is (for `describe`). */
  readonly #calls = new Map<number, { label: string; where: string }>();
  #callIds = 0;
  /** The run was given up as stuck: its settling loops end (see `finishOrStuck`). */
  #stuck = false;
  /** Calls and answers on their way in fake time (see `latencyOf`), woken at once by `heal`. */
  readonly #onTheirWay = new Set<Sleep>();

  /**
   * How long (fake time) a call to object `name` of `tier` takes to arrive, and its answer to come
   * back, made by `caller` (null: an isolate, the model's own code): 0 (or none set), at once.
   * Asked as the call is made, in the caller's context.
   */
  latencyOf: ((tier: Tier, name: string, caller: Caller | null) => number) | null = null;

  constructor(now: () => number) {
    this.#now = now;
  }

  /**
   * Spies on the bindings, clock.sleep and the timers of a second or more (the deadlines given to
   * renewals and pushes: they end in fake time, so a run replays whatever real time it takes).
   * Restored by vi.restoreAllMocks after each test.
   */
  install(): void {
    vi.spyOn(clock, "sleep").mockImplementation(
      (ms) =>
        new Promise<void>((wake) =>
          this.sleeping.push({ at: this.#now() + ms, wake, caller: this.#caller() }),
        ),
    );
    const realSetTimeout = globalThis.setTimeout;
    const realClearTimeout = globalThis.clearTimeout;
    vi.spyOn(globalThis, "setTimeout").mockImplementation(((
      handler: (...a: unknown[]) => void,
      ms?: number,
      ...rest: unknown[]
    ) => {
      if (typeof ms !== "number" || ms < DEADLINE_MS) return realSetTimeout(handler, ms, ...rest);
      const sleep: Sleep = {
        at: this.#now() + ms,
        wake: () => handler(...rest),
        caller: this.#caller(),
      };
      this.sleeping.push(sleep);
      return sleep;
    }) as unknown as typeof setTimeout);
    vi.spyOn(globalThis, "clearTimeout").mockImplementation(((handle: unknown) => {
      const i = this.sleeping.indexOf(handle as Sleep);
      if (i >= 0) this.sleeping.splice(i, 1);
      else realClearTimeout(handle as number);
    }) as typeof clearTimeout);
    for (const [namespace, tier] of [
      [env.QUOTA, "object"],
      [env.QUOTA_HOLDER, "holder"],
    ] as const) {
      const getByName = namespace.getByName.bind(namespace);
      this.#uncounted.set(namespace, getByName);
      vi.spyOn(namespace, "getByName").mockImplementation(((
        ...args: Parameters<typeof getByName>
      ) => this.#wrap(getByName(...args) as object, tier, args[0])) as typeof namespace.getByName);
    }
  }

  /** A stub the network does not see (evictDurableObject needs the runtime's own). */
  uncounted<T extends Rpc.DurableObjectBranded | undefined>(
    namespace: DurableObjectNamespace<T>,
    name: string,
  ): DurableObjectStub<T> {
    const getByName = this.#uncounted.get(namespace) ?? namespace.getByName.bind(namespace);
    return getByName(name) as DurableObjectStub<T>;
  }

  /**
   * Evicts object `name` of `tier` from memory (false: it was not running), and with it its
   * sleeps and timers: the instance evicted never runs again (as in production, where its memory
   * goes with it), so its background work must not wake, in the new instance's context, with what
   * the old one held. (What it sent before is on its way still.)
   */
  async evict(tier: Tier, name: string): Promise<boolean> {
    const stub =
      tier === "object" ? this.uncounted(env.QUOTA, name) : this.uncounted(env.QUOTA_HOLDER, name);
    const running = await evictIfRunning(stub);
    for (let i = this.sleeping.length - 1; i >= 0; i--) {
      const sleep = this.sleeping[i]!;
      const its = sleep.caller?.tier === tier && sleep.caller.name === name;
      if (its && !this.#onTheirWay.has(sleep)) this.sleeping.splice(i, 1);
    }
    return running;
  }

  /**
   * Whether object `name` of `tier` cannot be evicted now: a call is held (the object still has
   * active references), or a call to it is at the object, waiting (once the network has settled)
   * for something only fake time or a release brings, such as a call it made that is on its way:
   * evictDurableObject waits for that call, and nothing moves fake time meanwhile.
   */
  cannotEvict(tier: Tier, name: string): boolean {
    const its = `${tier} ${name}.`;
    const busy = [...this.#calls.values()].some(
      (c) => c.label.startsWith(its) && c.where === "at the callee",
    );
    return busy || this.held.length > 0;
  }

  /** Starts a new run: nothing armed, held or sleeping, no call in flight. */
  reset(): void {
    this.#generation++;
    this.#inFlight = 0;
    this.armed.length = 0;
    this.held.length = 0;
    this.sleeping.length = 0;
    this.fired.length = 0;
    this.lostBefore.length = 0;
    this.#gates.length = 0;
    this.#atGates = 0;
    this.#offered.clear();
    this.#calls.clear();
    this.#stuck = false;
    this.#onTheirWay.clear();
  }

  #takeFault(tier: Tier, method: string): Fault | null {
    if (UNFAULTED.has(method)) return null;
    const i = this.armed.findIndex((f) => f.tier === tier && f.method === method);
    if (i < 0) return null;
    return this.armed.splice(i, 1)[0]!.fault;
  }

  /** Held (not counted in flight) until the model releases it. */
  async #heldWhile(label: string, part: Held["part"], call: CallMade): Promise<void> {
    const generation = this.#generation;
    this.#inFlight--;
    const caller = this.#caller();
    await new Promise<void>((release) =>
      this.held.push({
        label: `${part} ${label}`,
        part,
        call,
        heldAt: this.#now(),
        release,
        caller,
      }),
    );
    this.#events++;
    if (generation === this.#generation) this.#inFlight++;
  }

  /**
   * On its way for `ms` of fake time (not counted in flight: time must move for it to arrive),
   * woken in its caller's context when the model moves time that far, or at once by `heal`.
   */
  async #onItsWay(ms: number, caller: Caller | null): Promise<void> {
    const generation = this.#generation;
    this.#inFlight--;
    await new Promise<void>((wake) => {
      const sleep: Sleep = {
        at: this.#now() + ms,
        wake: () => {
          this.#onTheirWay.delete(sleep);
          wake();
        },
        caller,
      };
      this.#onTheirWay.add(sleep);
      this.sleeping.push(sleep);
    });
    this.#events++;
    if (generation === this.#generation) this.#inFlight++;
  }

  #wrap<T extends object>(stub: T, tier: Tier, name: string): T {
    return new Proxy(stub, {
      get: (target, prop) => {
        const value = (target as Record<PropertyKey, unknown>)[prop];
        if (typeof value !== "function" || typeof prop === "symbol" || prop === "then")
          return value;
        return (...args: unknown[]) => {
          const fault = this.#takeFault(tier, prop);
          const label = `${tier} ${name}.${prop}`;
          const caller = this.#caller();
          const latency =
            this.#scheduling || MODEL_READS.has(prop)
              ? 0
              : (this.latencyOf?.(tier, name, caller) ?? 0);
          if (fault) this.fired.push(`${fault} ${label}`);
          const made: CallMade = { tier, method: prop, args };
          const deliver = () => Promise.resolve(Reflect.apply(value, target, args));
          return this.#track(label, fault, async (call) => {
            switch (fault) {
              case "loseBefore":
                this.lostBefore.push(made);
                throw droppedConnection(label);
              case "holdCall": {
                call.where = "held before it arrives";
                await this.#heldWhile(label, "call", made);
                call.where = "at the callee";
                return deliver();
              }
              case "holdAnswer": {
                const answer = await deliver().then(
                  (v) => ({ ok: true as const, v }),
                  (e: unknown) => ({ ok: false as const, e }),
                );
                call.where = "its answer held on the way back";
                await this.#heldWhile(label, "answer", made);
                if (!answer.ok) throw answer.e;
                return answer.v;
              }
              case "duplicate": {
                const [first] = await Promise.allSettled([deliver(), deliver()]);
                if (first.status === "rejected") throw first.reason;
                return first.value;
              }
              case "loseAfter": {
                await deliver().catch(() => undefined);
                throw droppedConnection(label);
              }
              default: {
                if (latency > 0) {
                  call.where = `on its way (${latency} ms)`;
                  await this.#onItsWay(latency, caller);
                  call.where = "at the callee";
                  const answer = await deliver().then(
                    (v) => ({ ok: true as const, v }),
                    (e: unknown) => ({ ok: false as const, e }),
                  );
                  call.where = `its answer on its way back (${latency} ms)`;
                  await this.#onItsWay(latency, caller);
                  if (!answer.ok) throw answer.e;
                  return answer.v;
                }
                if (!this.#scheduling || MODEL_READS.has(prop)) return deliver();
                call.where = "at a scheduler's gate before it arrives";
                await this.#gate(`call ${label}`);
                call.where = "at the callee";
                const answer = await deliver().then(
                  (v) => ({ ok: true as const, v }),
                  (e: unknown) => ({ ok: false as const, e }),
                );
                call.where = "its answer at a scheduler's gate";
                await this.#gate(`answer ${label}`);
                if (!answer.ok) throw answer.e;
                return answer.v;
              }
            }
          });
        };
      },
    });
  }

  async #track<R>(
    label: string,
    fault: Fault | null,
    call: (where: { where: string }) => Promise<R>,
  ): Promise<R> {
    const generation = this.#generation;
    const id = ++this.#callIds;
    const tracked = { label: fault ? `${label} (${fault})` : label, where: "at the callee" };
    this.#calls.set(id, tracked);
    this.#inFlight++;
    this.#events++;
    try {
      return await call(tracked);
    } finally {
      this.#events++;
      if (generation === this.#generation) {
        this.#inFlight--;
        this.#calls.delete(id);
      }
    }
  }

  /**
   * What the network holds now, in words: the calls not answered (and where each one is), the
   * calls and answers held or waiting at a scheduler's gate, and the sleeps with when they end.
   */
  describe(): string {
    const now = this.#now();
    const inObject = (c: Caller | null) => (c ? ` (from ${c.tier} ${c.name})` : "");
    const list = (items: string[]) =>
      items.length ? items.map((i) => `\n  ${i}`).join("") : " none";
    return [
      `calls not answered:${list([...this.#calls.values()].map((c) => `${c.label}: ${c.where}`))}`,
      `held:${list(this.held.map((h) => `${h.label}${inObject(h.caller)}, held ${now - h.heldAt} ms ago`))}`,
      `offered to a scheduler, not let go:${list([...this.#offered])}`,
      `at a scheduler's gate, not offered:${list(this.#gates.map((g) => g.label))}`,
      `sleeping:${list(
        [...this.sleeping]
          .sort((a, b) => a.at - b.at)
          .map(
            (z) =>
              `until ${new Date(z.at).toISOString()} (${z.at - now} ms on)${inObject(z.caller)}`,
          ),
      )}`,
    ].join("\n");
  }

  /**
   * `work`, or, once it has taken `ms` of real time, a failure that names `what` was stuck and
   * what the network holds (`describe`); the run's settling loops then end. A run that stops
   * making progress is a counterexample, not a hang.
   */
  async finishOrStuck<T>(what: string, work: Promise<T>, ms = STUCK_AFTER_MS): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | null = null;
    const stuck = new Promise<never>((_, reject) => {
      timer = realTimeout(() => {
        this.#stuck = true;
        reject(
          new Error(
            `stuck: ${what} did not finish within ${ms} ms (real time)\n${this.describe()}`,
          ),
        );
      }, ms);
    });
    try {
      return await Promise.race([work, stuck]);
    } finally {
      if (timer !== null) realClearTimeout(timer);
    }
  }

  /**
   * Waits until no call is in flight (held ones aside) and none started or ended during a
   * macrotask: work that goes on only on promises has then finished, sleeps, or waits for
   * something held. A call waiting (through its object) for a held one, or for one on its way
   * (`latencyOf`), stays in flight: once something is held or on its way, quiet for QUIET_TASKS
   * macrotasks and QUIET_MS of real time counts as settled (GATE_QUIET_TASKS macrotasks while
   * calls wait only at a scheduler's gates).
   */
  async settle(): Promise<void> {
    let quietTasks = 0;
    let quietSince = Date.now();
    for (let rounds = 0; ; rounds++) {
      if (this.#stuck) throw new Error("network: the run was given up as stuck");
      const before = this.#events;
      await nextTask();
      if (this.#events !== before) {
        quietTasks = 0;
        quietSince = Date.now();
        continue;
      }
      if (this.#inFlight <= 0) return;
      quietTasks++;
      const heldOrOnItsWay = this.held.length > 0 || this.#onTheirWay.size > 0;
      if (heldOrOnItsWay && quietTasks >= QUIET_TASKS && Date.now() - quietSince >= QUIET_MS)
        return;
      if (!heldOrOnItsWay && this.#atGates > 0 && quietTasks >= GATE_QUIET_TASKS) return;
      if (rounds > 20_000)
        throw new Error("network: calls still in flight after 20,000 macrotasks");
    }
  }

  /** Wakes the sleeps fake time has reached, earliest first. */
  async wakeDue(): Promise<number> {
    const now = this.#now();
    const due = this.sleeping.filter((s) => s.at <= now).sort((a, b) => a.at - b.at);
    for (const s of due) this.sleeping.splice(this.sleeping.indexOf(s), 1);
    for (const s of due) await this.#inContextOf(s.caller, s.wake);
    return due.length;
  }

  /** When the next sleep or deadline ends (null: none). */
  nextWake(): number | null {
    return this.sleeping.reduce<number | null>(
      (soonest, s) => (soonest === null || s.at < soonest ? s.at : soonest),
      null,
    );
  }

  #caller(): Caller | null {
    return this.#callerOf?.() ?? null;
  }

  /** Runs `fn` in the context of the object `caller` (null: here). */
  async #inContextOf(caller: Caller | null, fn: () => void): Promise<void> {
    if (!caller) return fn();
    const stub =
      caller.tier === "object"
        ? this.uncounted(env.QUOTA, caller.name)
        : this.uncounted(env.QUOTA_HOLDER, caller.name);
    await runInDurableObject(stub, fn);
  }

  /** Releases the `index`-th held call or answer (modulo how many are held); false: none held. */
  async release(index: number): Promise<Held | null> {
    if (this.held.length === 0) return null;
    const [h] = this.held.splice(index % this.held.length, 1);
    this.onRelease?.(h!);
    // A call an object made goes on in that object's context (workerd refuses I/O across them).
    await this.#inContextOf(h!.caller, h!.release);
    return h!;
  }

  /**
   * From now on (`on`), every call between the tiers and every answer, whoever makes it, waits at
   * a gate until a scheduler lets it go on (`offerGates`): the scheduler picks the order in which
   * calls arrive and answers return. Off: they go on at once (gates already offered still wait).
   */
  scheduleCalls(on: boolean): void {
    this.#scheduling = on;
  }

  /** Waits (not counted in flight) until a scheduler lets the call or answer go on. */
  async #gate(label: string): Promise<void> {
    const generation = this.#generation;
    this.#inFlight--;
    const caller = this.#caller();
    this.#atGates++;
    await new Promise<void>((open) => this.#gates.push({ label, caller, open }));
    this.#atGates--;
    this.#events++;
    if (generation === this.#generation) this.#inFlight++;
  }

  /**
   * Hands the calls and answers waiting at gates to `s`: each goes on, in its caller's context,
   * when `s` releases it. Returns how many were waiting.
   */
  offerGates(s: fc.Scheduler): number {
    const offered = this.#gates.splice(0);
    for (const g of offered) {
      this.#offered.add(g.label);
      void s.schedule(Promise.resolve(), g.label).then(() => {
        this.#offered.delete(g.label);
        const opening = this.#inContextOf(g.caller, g.open);
        this.#opening.add(opening);
        void opening.finally(() => this.#opening.delete(opening));
      });
    }
    return offered.length;
  }

  /** Waits for the gates a scheduler let go to be open. */
  async gatesOpened(): Promise<void> {
    while (this.#opening.size) await Promise.all([...this.#opening]);
  }

  /** Every call and answer on its way arrives now (a healed network has no latency). */
  async #arriveNow(): Promise<void> {
    while (this.#onTheirWay.size) {
      for (const sleep of [...this.#onTheirWay]) {
        const i = this.sleeping.indexOf(sleep);
        if (i >= 0) this.sleeping.splice(i, 1);
        await this.#inContextOf(sleep.caller, sleep.wake);
      }
      await this.settle();
    }
  }

  /** Told of each release (the model notes what a late call may cost). */
  onRelease: ((held: Held) => void) | null = null;

  /**
   * Tells the network which object is making a call (from the objects' own context, see
   * quota-model.ts installObjectClocks); null: the test's own code (an isolate).
   */
  callerIs(callerOf: () => Caller | null): void {
    this.#callerOf = callerOf;
  }

  /**
   * Disarms every fault and releases everything held (the network heals), until nothing is held
   * once the released work has settled: a call released goes on, and its caller's answer may then
   * be held by a fault that fired before the heal (a holder's `admit` whose answer is held, that
   * waited for its own held call to the key's object). Latency ends: what is on its way arrives
   * at once, and calls made from then on take none.
   */
  async heal(): Promise<void> {
    this.armed.length = 0;
    this.latencyOf = null;
    do {
      await this.#arriveNow();
      while (this.held.length) await this.release(0);
      await this.settle();
    } while (this.held.length || this.#onTheirWay.size);
  }
}
