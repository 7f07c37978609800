import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { rateLimitHeaders } from "../src/quota/headers";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, evictHolder } = backgroundWork(time);
let seq = 0;

const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));

describe("a request answered from standing permits kept across an eviction", () => {
  it("carries the key's windows, so its quota headers can be built", async () => {
    const keyId = `standing_evicted_${++seq}`;
    const start = T0 + 45_000;
    await passTo(start);
    const first = await holderOf(keyId).admit(keyId, POLICY);
    expect(first.reached && first.decision.outcome).toBe("allowed");
    await passTo(start + 30_000); // the next minute's refill brings standing permits
    for (let i = 1; i <= 2; i++) {
      await evictHolder(keyId);
      await passTo(start + i * 5 * MINUTE_MS);
      const answer: HolderAnswer = await holderOf(keyId).admit(keyId, POLICY);
      expect(answer.reached && answer.decision.outcome).toBe("allowed");
      if (!answer.reached) return;
      expect(answer.fromStock, "answered from the kept permits, not forwarded").toBe(true);
      expect(answer.decision.windows.map((w) => w.name).sort()).toEqual(["day", "minute"]);
      const headers = rateLimitHeaders(answer.decision);
      expect(headers["X-RateLimit-Limit"]).toBe(String(POLICY.perMinute));
      await passTime();
    }
  });
});
