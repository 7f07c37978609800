// A revocation reaches every location before the admin API answers, as a property: random
// interleavings of 4 locations × 4 isolates on one key, each run replayable from its seed, with
// the key disabled and enabled again at random moments (configure, as the admin API pushes it).
// The isolates are kept quiet (never two requests within a second: no lease of their own), so
// every request is decided by its location's holder, from stock or by the key's object: a
// request sent once the disable has been pushed must be refused, whatever the holders were doing
// (a grant on its way back, a renewal, a refill when the minute turns, a hand-back), and a
// request sent once the enable has been pushed can be admitted again.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import type { Policy } from "../src/quota/windows";
import { backgroundWork } from "./background-work";
import { isolateClientIn, mockClock, seededRandom as random, T0 } from "./helpers";

const time = mockClock(T0);
const background = backgroundWork(time);

const LOCATIONS = ["AMS", "FRA", "SIN", "IAD"];
/** An isolate sends at most one request a second: below the rate that takes a lease. */
const QUIET_GAP_MS = 1_000;

type KeyState = "enabled" | "disabling" | "disabled" | "enabling";

describe("disable and enable racing 4 locations × 4 isolates, random interleavings under fake time", () => {
  it.each([
    [11, 120],
    [12, 600],
  ])(
    "seed %i (%i a minute): no request sent after the disable was pushed is admitted",
    {
      timeout: 120_000,
    },
    async (seed, perMinute) => {
      const next = random(seed);
      const keyId = `revocation_${seed}_${perMinute}`;
      let policy: Policy = { perMinute, perDay: 100_000, version: 1, revoked: false };
      const object = () => env.QUOTA.getByName(keyId);
      // A slow network: one answer in four takes a few macrotasks longer on its way back, one in
      // twenty much longer (the push of a change can overtake it).
      background.delayAnswers(() => {
        const slow = next();
        return slow < 0.05
          ? 5 + Math.floor(next() * 15)
          : slow < 0.25
            ? 1 + Math.floor(next() * 3)
            : 0;
      });

      const isolates = LOCATIONS.flatMap((location) =>
        Array.from({ length: 4 }, () => {
          const { leases, client } = isolateClientIn(keyId, location);
          return { location, leases, client, policy, lastSent: -Infinity, starting: false };
        }),
      );
      type Isolate = (typeof isolates)[number];

      let state: KeyState = "enabled";
      /** Changes pushed (or being pushed) so far. */
      let changes = 0;
      const violations: string[] = [];
      const admittedWhile: Record<KeyState, number> = {
        enabled: 0,
        disabling: 0,
        disabled: 0,
        enabling: 0,
      };
      let refusedWhileDisabled = 0;
      let disables = 0;

      /** One request, started after a random number of promise turns; checks its answer. */
      const request = async (iso: Isolate): Promise<void> => {
        iso.starting = true;
        for (let turns = Math.floor(next() * 8); turns > 0; turns--) await null;
        iso.starting = false;
        iso.lastSent = time.now;
        const sentWhile = state;
        const sentInChange = changes;
        const sentAt = time.now;
        const result = await iso.client.admit(iso.policy);
        expect(result.reached, "every request was decided").toBe(true);
        if (!result.reached) return;
        result.afterResponse?.catch(() => undefined);
        const allowed = result.decision.outcome === "allowed";
        if (allowed) admittedWhile[sentWhile]++;
        // Sent once the disable was pushed, answered before an enable was: must be refused.
        if (sentWhile === "disabled" && changes === sentInChange) {
          if (allowed)
            violations.push(
              `seed ${seed}: admitted a request sent at ${sentAt} (${iso.location}, its key version ${iso.policy.version}, key at ${policy.version}) ${JSON.stringify(result.decision)}`,
            );
          else refusedWhileDisabled++;
        }
      };

      /** Requests still on their way, awaited a few steps later (they race the next events). */
      let inFlight: Promise<void>[] = [];
      /** Pushes `change` (as the admin API does), updating `state` around it. */
      const push = async (during: KeyState, after: KeyState, change: Partial<Policy>) => {
        policy = { ...policy, ...change, version: policy.version + 1 };
        const pushed = policy;
        changes++;
        state = during;
        await object().configure(pushed);
        state = after;
        // Some isolates re-read the key at once; the others keep the version they cached.
        for (const iso of isolates) if (next() < 0.3) iso.policy = pushed;
      };

      const end = T0 + 2 * MINUTE_MS;
      time.now = T0 + 20_000;
      let change: Promise<void> | null = null;
      while (time.now < end) {
        time.now += 1 + Math.floor(next() * 400);
        if (next() < 0.5) await background.passTime((due) => due.sort(() => next() - 0.5));
        else background.wakeDue((due) => due.sort(() => next() - 0.5));

        if (!change && next() < 0.04) {
          change =
            state === "enabled"
              ? push("disabling", "disabled", { revoked: true }).then(() => void disables++)
              : push("enabling", "enabled", { revoked: false });
          change = change.finally(() => {
            change = null;
          });
        }

        const ready = isolates.filter(
          (iso) => !iso.starting && time.now - iso.lastSent >= QUIET_GAP_MS,
        );
        for (const iso of ready) if (next() < 0.3) inFlight.push(request(iso));
        // Some requests are answered now, others stay on their way for a step or two.
        if (next() < 0.6) {
          await Promise.all(inFlight);
          inFlight = [];
        }
        if (change && next() < 0.5) await change;
      }
      await Promise.all(inFlight);
      await change;

      expect(violations).toEqual([]);
      // Preconditions: the key was disabled while requests kept coming, and admitted them again
      // once enabled; no isolate held a lease of its own (every request went to a holder).
      expect(disables, "disables pushed").toBeGreaterThan(1);
      expect(refusedWhileDisabled, "requests refused while disabled").toBeGreaterThan(10);
      expect(admittedWhile.enabled, "requests admitted while enabled").toBeGreaterThan(10);
      for (const iso of isolates) expect(iso.leases.unusedPermits).toBe(0);
      const usage = await object().usage();
      expect(usage.minute.count).toBeLessThanOrEqual(perMinute);
    },
  );
});
