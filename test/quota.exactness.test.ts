// Never over-admitted, as a property: random interleavings of 4 locations × 4 isolates on one
// key, each run replayable from its seed. Real QuotaHolder objects (one per location) and the
// key's real QuotaLimiter; simulated isolates, each with its own LeaseHolder and client, as the
// Worker runs them (busy isolates hold leases of their own, quiet ones are decided by their
// location's holder). Fake time moves in random steps across minute ends and midnight, and the
// background work (renewals, hand-backs at expiry, refills) wakes as it passes, sometimes
// racing the next requests. Along the way: the key's plan is re-pushed (a new policy version,
// which every holder is told of), usage is read (which hands a location's stock back), and a
// holder goes away with its stock.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { holderName } from "../src/objects/quota-holder";
import { heldBound } from "../src/quota/lease";
import type { Policy } from "../src/quota/windows";
import { backgroundWork } from "./background-work";
import {
  evictIfRunning,
  isolateClientIn,
  MIDNIGHT,
  mockClock,
  seededRandom as random,
} from "./helpers";

const time = mockClock(MIDNIGHT);
const background = backgroundWork(time);

const LOCATIONS = ["AMS", "FRA", "SIN", "IAD"];
const ISOLATES_PER_LOCATION = 4;

/** Counts per window start (a minute's or a day's). */
class Tally {
  readonly #counts = new Map<number, number>();
  add(windowStart: number, n: number): number {
    const total = this.of(windowStart) + n;
    this.#counts.set(windowStart, total);
    return total;
  }
  of(windowStart: number): number {
    return this.#counts.get(windowStart) ?? 0;
  }
}

const minuteOf = (ms: number) => ms - (ms % MINUTE_MS);
const dayOf = (ms: number) => ms - (ms % DAY_MS);

describe("4 locations × 4 isolates racing on one key, random interleavings under fake time", () => {
  it.each([
    // seed, per-minute limit, per-day limit: the day binds in 23:59 (about 1.65 minutes of the
    // per-minute limit are used before it), then a new day begins.
    [1, 120, 276],
    [2, 240, 552],
    [3, 360, 828],
  ])(
    "seed %i (%i a minute, %i a day): never over-admitted, and the object counted every admission",
    {
      timeout: 120_000,
    },
    async (seed, perMinute, perDay) => {
      const next = random(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
      const keyId = `exactness_${seed}_${perMinute}`;
      let policy: Policy = { perMinute, perDay, version: 1, revoked: false };
      const bound = heldBound(policy);
      const object = () => env.QUOTA.getByName(keyId);

      const isolates = LOCATIONS.flatMap((location) =>
        Array.from({ length: ISOLATES_PER_LOCATION }, () => {
          const { leases, client } = isolateClientIn(keyId, location);
          return { location, leases, client, policy };
        }),
      );
      type Isolate = (typeof isolates)[number];

      /** Permits held unused in memory, every isolate and holder together (for the end). */
      const unusedEverywhere = async () => {
        let unused = isolates.reduce((n, iso) => n + iso.leases.unusedPermits, 0);
        for (const location of LOCATIONS)
          unused += await env.QUOTA_HOLDER.getByName(holderName(keyId, location)).unusedPermits();
        return unused;
      };

      /** Starts one request after a random number of promise turns (sometimes a macrotask). */
      const request = async (iso: Isolate): Promise<boolean> => {
        for (let turns = Math.floor(next() * 8); turns > 0; turns--) await null;
        if (next() < 0.1) await new Promise((resolve) => setTimeout(resolve, 0));
        let result = await iso.client.admit(iso.policy);
        if (result.reached && result.decision.outcome === "stale") {
          // The isolate's copy of the key is older than the object's: as the Worker does
          // (middleware/enforce-quota.ts), it reads the key again and asks again.
          iso.policy = policy;
          result = await iso.client.admit(iso.policy);
        }
        expect(result.reached, "every request was decided").toBe(true);
        if (!result.reached) return false;
        // Run as the Worker runs it: after the response, not waited for.
        result.afterResponse?.catch(() => undefined);
        return result.decision.outcome === "allowed";
      };

      // Demand: 1.2 times the per-minute limit a minute (refused beyond the limits, never enough
      // to earn a ban: in 23:59, once the day is used up, every request is refused, up to what the
      // first half-minute admitted, which stays below the ban's threshold). Each minute two isolates are hot (they take most requests, in bursts:
      // leases of their own); the others are quiet (their location's holder decides for them).
      const perMs = (1.2 * perMinute) / MINUTE_MS;
      let hot: Isolate[] = [];
      let hotMinute = 0;

      const admittedInMinute = new Tally();
      const admittedInDay = new Tally();
      let steps = 0;
      let refused = 0;
      let mostHeld = 0;
      let mostHeldByIsolates = 0;

      const STEP_MS = 1_000;
      const start = MIDNIGHT - 2 * MINUTE_MS - 30_000;
      const end = MIDNIGHT + MINUTE_MS + 15_000;
      time.now = start;
      while (time.now < end) {
        steps++;
        // Fake time moves on: mostly up to STEP_MS, in a minute's last seconds sometimes to just
        // before or just after its end (a minute's last requests, the next one's first), and
        // sometimes not at all (more requests at the same instant).
        const before = time.now;
        const toEnd = minuteOf(time.now) + MINUTE_MS - time.now;
        const jump = next();
        if (toEnd < 10_000 && jump < 0.1) time.now += toEnd - 1 - Math.floor(next() * toEnd * 0.2);
        else if (toEnd < 2_000 && jump < 0.2) time.now += toEnd + Math.floor(next() * 20);
        else if (jump > 0.1) time.now += 1 + Math.floor(next() * STEP_MS);
        if (minuteOf(time.now) !== hotMinute) {
          hotMinute = minuteOf(time.now);
          hot = [pick(isolates), pick(isolates)];
        }
        const demand = Math.max(1, perMs * (time.now - before));

        // The background work fake time has reached: finished before the next requests arrive,
        // or racing them, woken in a random order.
        const shuffle = <T>(items: T[]) => items.sort(() => next() - 0.5);
        if (next() < 0.5) await background.passTime(shuffle);
        else background.wakeDue(shuffle);

        const racing: Promise<unknown>[] = [];
        const event = next();
        if (event < 0.02) {
          // The key's plan pushed again (a roll, an edit): a new policy version, the same
          // limits. Every holder with stock is told; some isolates learn of it at once.
          policy = { ...policy, version: policy.version + 1 };
          const pushed = policy;
          racing.push(object().configure(pushed));
          for (const iso of isolates) if (next() < 0.5) iso.policy = pushed;
        } else if (event < 0.04) {
          // A usage read in one isolate: hands its lease and its location's stock back.
          const iso = pick(isolates);
          racing.push(iso.client.usage(iso.policy));
        } else if (event < 0.05 && time.now < MIDNIGHT - MINUTE_MS) {
          // A location's holder goes away with its stock (counted, never to be used), before
          // the day whose counts are compared at the end.
          await background.settle();
          const location = pick(LOCATIONS);
          // Not running when this location has not been used yet: nothing to evict.
          await evictIfRunning(background.uncounted(env.QUOTA_HOLDER, holderName(keyId, location)));
        }

        const burst = Array.from({ length: Math.round(next() * 2 * demand) }, () =>
          request(next() < 0.7 ? pick(hot) : pick(isolates)),
        );
        const [outcomes] = await Promise.all([Promise.all(burst), ...racing]);
        const admitted = outcomes.filter(Boolean).length;
        refused += outcomes.length - admitted;

        const at = `seed ${seed}, step ${steps}, ${new Date(time.now).toISOString()}`;
        const inMinute = admittedInMinute.add(minuteOf(time.now), admitted);
        const inDay = admittedInDay.add(dayOf(time.now), admitted);
        expect(inMinute, `${at}: admitted in the minute`).toBeLessThanOrEqual(perMinute);
        expect(inDay, `${at}: admitted in the day`).toBeLessThanOrEqual(perDay);
        const usage = await object().usage();
        expect(usage.bannedUntil, `${at}: banned (too much demand)`).toBeNull();
        // Every admission was counted first, and the object never counts past a limit (what it
        // granted in leases and stock included).
        expect(usage.minute.count, `${at}: the object's minute count`).toBeGreaterThanOrEqual(
          inMinute,
        );
        expect(usage.day.count, `${at}: the object's day count`).toBeGreaterThanOrEqual(inDay);
        expect(usage.minute.count, `${at}: counted in the minute`).toBeLessThanOrEqual(perMinute);
        expect(usage.day.count, `${at}: counted in the day`).toBeLessThanOrEqual(perDay);
        // What the object counted and nobody admitted: permits held unused in leases and stock,
        // or stranded (a holder that went away, a lease not handed back yet). All of them
        // together, in every tier and location, at most heldBound.
        const held = usage.minute.count - inMinute;
        expect(held, `${at}: permits counted, not admitted`).toBeLessThanOrEqual(bound);
        mostHeld = Math.max(mostHeld, held);
        mostHeldByIsolates = Math.max(
          mostHeldByIsolates,
          isolates.reduce((n, iso) => n + iso.leases.unusedPermits, 0),
        );
      }

      // Preconditions of the property: demand went past the limits (both bound), and leases
      // and stock were held (the run raced them, not one call per request).
      expect(refused, "requests refused").toBeGreaterThan(0);
      expect(mostHeld, "most permits held unused at once").toBeGreaterThan(0);
      expect(mostHeldByIsolates, "most permits held by isolates' own leases").toBeGreaterThan(0);
      const reached = (admitted: number, limit: number) => admitted >= limit - 2 * bound;
      expect(reached(admittedInMinute.of(MIDNIGHT - 2 * MINUTE_MS), perMinute), "23:58").toBe(true);
      expect(reached(admittedInDay.of(dayOf(MIDNIGHT - 1)), perDay), "the day").toBe(true);
      expect(reached(admittedInMinute.of(MIDNIGHT), perMinute), "00:00").toBe(true);

      // Everything handed back: the object counts exactly what was admitted in the current
      // minute and day (no holder went away since midnight).
      await background.settle();
      await Promise.all(
        isolates.map((iso) =>
          iso.leases.giveBackUnused({ giveBack: (r) => object().returnLease(r) }),
        ),
      );
      for (const location of LOCATIONS)
        await env.QUOTA_HOLDER.getByName(holderName(keyId, location)).giveBack(keyId);
      await background.settle();
      expect(await unusedEverywhere()).toBe(0);
      const usage = await object().usage();
      expect(usage.minute.count, "the minute's count").toBe(
        admittedInMinute.of(minuteOf(time.now)),
      );
      expect(usage.day.count, "the day's count").toBe(admittedInDay.of(dayOf(time.now)));
    },
  );
});
