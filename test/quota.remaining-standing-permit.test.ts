// X-RateLimit-Remaining for a key used in one location, one request at a time, where a minute's
// requests are answered first by the key's object or the location's stock and then from a
// standing permit of that minute: it must go down by exactly one per admitted request
// (docs/quotas.md, "How exact X-RateLimit-Remaining is").
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName, type QuotaHolder } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
let seq = 0;

describe("X-RateLimit-Remaining where a standing permit serves after other requests of its minute", () => {
  const time = mockClock(T0);
  const { passTime, passTo, forgetSleeps, uncounted } = backgroundWork(time);
  const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  /** The standing permits the holder keeps in its storage (written as each is taken). */
  const keptStanding = async (keyId: string) =>
    (
      await runInDurableObject(
        uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS")),
        (_: QuotaHolder, state) =>
          state.storage.kv.get<{ standing: { minuteStart: number; used: number }[] }>("standing"),
      )
    )?.standing ?? [];
  const minuteLeft = (a: HolderAnswer) =>
    a.reached ? a.decision.windows.find((w) => w.name === "minute")?.remaining : undefined;

  it("a holder evicted between a sparse key's requests, then four requests one at a time in one minute: Remaining goes down by one at each", async () => {
    const keyId = `standing_remaining_${++seq}`;
    const holder = holderOf(keyId);
    // A key calling once a minute here: standing permits for the minutes to come.
    for (const at of [T0 + 2_000, T0 + 62_000]) {
      await passTo(at);
      const a = await holder.admit(keyId, POLICY);
      expect(a.reached && a.decision.outcome).toBe("allowed");
      await passTime();
    }
    // Idle long enough to be evicted (its standing permits kept in its storage).
    await holder.unusedPermits();
    await evictDurableObject(uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS")));
    forgetSleeps();
    const M = T0 + 2 * MINUTE_MS;
    const shown: (number | undefined)[] = [];
    const local: boolean[] = [];
    const usedOfThisMinute: (number | undefined)[] = [];
    // 0.5 s into the minute (the permit held again is not usable in its first second): forwarded,
    // with a stock of 2; then that stock; then, the stock used up, the minute's standing permit.
    for (const at of [M + 500, M + 1_500, M + 40_000, M + 45_000]) {
      await passTo(at);
      const a = await holder.admit(keyId, POLICY);
      expect(a.reached && a.decision.outcome).toBe("allowed");
      shown.push(minuteLeft(a));
      local.push(a.reached && a.fromStock);
      usedOfThisMinute.push((await keptStanding(keyId)).find((s) => s.minuteStart === M)?.used);
      await passTime();
    }
    expect(local, "the first forwarded, the rest answered in the location").toEqual([
      false,
      true,
      true,
      true,
    ]);
    expect(usedOfThisMinute, "the fourth was served from the minute's standing permit").toEqual([
      0, 0, 0, 1,
    ]);
    expect(shown, "59, 58, 57, 56: one less per request admitted").toEqual([59, 58, 57, 56]);
  });
});
