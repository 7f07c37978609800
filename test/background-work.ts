// Fake time for the quota objects' background work (lease renewals, hand-backs at expiry, a
// location holder's refill when a minute turns), and a way to wait for exactly that work.
//
// Background work sleeps on clock.sleep, which these helpers replace: a sleep waits for fake
// time to reach its end. passTime() wakes the sleeps fake time has reached, then waits until no
// call to a quota object (QUOTA or QUOTA_HOLDER, from the test or from inside an object) is in
// flight: the Durable Objects run in the test's isolate and use the same bindings, so every call
// they make is seen. Work that goes on after a call only on promises (never on real timers)
// then either finished or sleeps again.
import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, vi } from "vitest";
import { clock, MINUTE_MS } from "../src/lib/clock";
import { holderName } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { GIVE_BACK_GRACE_MS } from "../src/quota/lease";

/** A background sleep waiting for fake time to reach `at`. */
interface Sleep {
  at: number;
  wake: () => void;
}

/**
 * Background work (a minute's refill, hand-backs at expiry, renewals) never wakes from here on:
 * what a test sees is what its requests did, or, called mid-test, as if the holder were gone.
 * The file's mocked clock (helpers.ts mockClock) restores the spy after each test.
 */
export function freezeBackgroundWork(): void {
  vi.spyOn(clock, "sleep").mockImplementation(() => new Promise<void>(() => undefined));
}

/** A macrotask: every promise continuation queued before it has run. */
const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Replaces clock.sleep for every test of the calling file and counts calls to the quota objects
 * in flight. `time` is the file's mocked clock (helpers.ts mockClock), which restores the spies.
 */
export function backgroundWork(time: { now: number }) {
  const sleeping: Sleep[] = [];
  let inFlight = 0;
  let started = 0;
  /** How many macrotasks each answer waits on its way back (a slow network), if set. */
  let answerDelay: (() => number) | null = null;
  /** The namespaces' own getByName, for what needs a real stub (evictDurableObject). */
  const uncountedGetByName = new Map<object, (name: string) => unknown>();

  /** `stub` with every method call counted while in flight. */
  function counted<T extends object>(stub: T): T {
    return new Proxy(stub, {
      get(target, prop) {
        const value = (target as Record<PropertyKey, unknown>)[prop];
        if (typeof value !== "function" || typeof prop === "symbol" || prop === "then")
          return value;
        return (...args: unknown[]) => {
          inFlight++;
          started++;
          try {
            const delay = answerDelay?.() ?? 0;
            return Promise.resolve(Reflect.apply(value, target, args))
              .finally(async () => {
                for (let i = 0; i < delay; i++) await nextTask();
              })
              .finally(() => inFlight--);
          } catch (err) {
            inFlight--;
            throw err;
          }
        };
      },
    });
  }

  beforeEach(() => {
    sleeping.length = 0;
    inFlight = 0;
    answerDelay = null;
    vi.spyOn(clock, "sleep").mockImplementation(
      (ms) => new Promise<void>((wake) => sleeping.push({ at: clock.now() + ms, wake })),
    );
    for (const namespace of [env.QUOTA, env.QUOTA_HOLDER] as const) {
      const getByName = namespace.getByName.bind(namespace);
      uncountedGetByName.set(namespace, getByName);
      vi.spyOn(namespace, "getByName").mockImplementation(((
        ...args: Parameters<typeof getByName>
      ) => counted(getByName(...args))) as typeof namespace.getByName);
    }
  });

  /**
   * Waits until no call to a quota object is in flight and none started during a macrotask:
   * every promise continuation queued before a macrotask runs before it, so work that goes on
   * after a call only on promises has by then made its next call, or finished, or sleeps.
   */
  async function settle(): Promise<void> {
    for (;;) {
      const before = started;
      await nextTask();
      if (inFlight === 0 && started === before) return;
    }
  }

  /**
   * Wakes the sleeps fake time has reached (in the order `order` puts them, default: when they
   * end), and waits for the work they start, and for any other call in flight, to finish.
   */
  async function passTime(order: (due: Sleep[]) => Sleep[] = (due) => due): Promise<void> {
    wakeDue(order);
    await settle();
  }

  /** Wakes the sleeps fake time has reached without waiting for what they start. */
  function wakeDue(order: (due: Sleep[]) => Sleep[] = (due) => due): number {
    const due = sleeping.filter((s) => s.at <= time.now).sort((a, b) => a.at - b.at);
    for (const s of due) sleeping.splice(sleeping.indexOf(s), 1);
    for (const s of order(due)) s.wake();
    return due.length;
  }

  /** A stub whose calls are not counted (evictDurableObject needs the runtime's own). */
  function uncounted<T extends Rpc.DurableObjectBranded | undefined>(
    namespace: DurableObjectNamespace<T>,
    name: string,
  ): DurableObjectStub<T> {
    const getByName = uncountedGetByName.get(namespace) ?? namespace.getByName.bind(namespace);
    return getByName(name) as DurableObjectStub<T>;
  }

  /**
   * Delays every answer of a quota object by `macrotasks()` macrotasks on its way back (each
   * call draws its own), so that answers arrive after work started later; null: no delay.
   */
  function delayAnswers(macrotasks: (() => number) | null): void {
    answerDelay = macrotasks;
  }

  /**
   * Moves fake time to `at`, waking the background work due on the way, in order: at each
   * minute's start on the way (the refills wake at their own time), then once hand-backs are due
   * after it, then at `at`.
   */
  async function passTo(at: number): Promise<void> {
    for (let m = time.now - (time.now % MINUTE_MS) + MINUTE_MS; m <= at; m += MINUTE_MS) {
      time.now = m;
      await passTime();
      time.now = m + GIVE_BACK_GRACE_MS;
      await passTime();
    }
    time.now = at;
    await passTime();
  }

  /** Drops every sleep (its object was evicted: the work it would have woken is gone with it). */
  function forgetSleeps(): void {
    sleeping.length = 0;
  }

  /**
   * Evicts `keyId`'s location holder in `location` as the runtime evicts an idle one: a call into
   * it first makes the storage writes its background work owes (woken by fake time, from outside
   * the object), and the sleeps it left are forgotten with it.
   */
  async function evictHolder(keyId: string, location = "AMS"): Promise<void> {
    const name = holderName(keyId, location);
    await env.QUOTA_HOLDER.getByName(name).unusedPermits();
    await evictDurableObject(uncounted(env.QUOTA_HOLDER, name));
    forgetSleeps();
  }

  return {
    passTime,
    passTo,
    forgetSleeps,
    evictHolder,
    wakeDue,
    settle,
    uncounted,
    delayAnswers,
    sleeping: () => sleeping.length,
  };
}

/**
 * Counts the calls the key's objects get from here on (requests forwarded, renewals, refills,
 * hand-backs); the spies end with the test.
 */
export function countObjectCalls(): () => number {
  let calls = 0;
  for (const method of ["admit", "renewLease", "returnLease", "returnLeases"] as const) {
    const original = QuotaLimiter.prototype[method];
    vi.spyOn(QuotaLimiter.prototype, method).mockImplementation(function (
      this: QuotaLimiter,
      ...args: unknown[]
    ) {
      calls++;
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as never);
  }
  return () => calls;
}
