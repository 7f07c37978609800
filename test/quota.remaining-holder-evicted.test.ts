import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { rateLimitHeaders } from "../src/quota/headers";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

// The day binds (fewer left than the minute's 60): X-RateLimit-* show the day window.
const POLICY = policyWith(60, 50);
let seq = 0;

describe("X-RateLimit-Remaining of a sparse key whose holder is evicted between its requests", () => {
  const time = mockClock(T0);
  const { passTime, passTo, evictHolder } = backgroundWork(time);
  const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));

  const remainingShown = (a: HolderAnswer) =>
    a.reached ? Number(rateLimitHeaders(a.decision)["X-RateLimit-Remaining"]) : undefined;

  it("goes down by one at each request answered from the kept standing permits", async () => {
    const keyId = `evicted_${++seq}`;
    const holder = holderOf(keyId);
    const start = T0 + 45_000;
    await passTo(start);
    const first = await holder.admit(keyId, POLICY);
    expect(first.reached && first.decision.outcome).toBe("allowed");
    // The next minute's refill: standing permits, and a stock kept with them once its minute is
    // over (before that, an eviction loses it: docs/quotas.md's exception).
    await passTo(start + 90_000);
    const shown: (number | undefined)[] = [remainingShown(first)];
    for (let i = 1; i <= 3; i++) {
      await evictHolder(keyId);
      await passTo(start + i * 5 * MINUTE_MS);
      const a = await holder.admit(keyId, POLICY);
      expect(a.reached && a.fromStock && a.decision.outcome, "from a kept permit").toBe("allowed");
      shown.push(remainingShown(a));
      await passTime();
    }
    const [firstShown = 0] = shown;
    expect(shown, "one less per request admitted").toEqual([
      firstShown,
      firstShown - 1,
      firstShown - 2,
      firstShown - 3,
    ]);
    // And it is the truth: with everything handed back, what the key's object counts is used.
    await holder.giveBack(keyId);
    await passTime();
    const { day } = await env.QUOTA.getByName(keyId).usage(POLICY);
    expect(shown.at(-1), "the last one shown is the truth").toBe(POLICY.perDay - day.count);
  });
});
