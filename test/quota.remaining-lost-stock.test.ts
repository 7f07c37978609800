// X-RateLimit-Remaining shown by a location holder evicted between a sparse key's requests, against
// the truth as docs/quotas.md defines it in one location: the key's object's remaining with the
// holder's own unused permits counted as room. The stock the holder lost with its eviction is no
// longer its own: the key's object counts it as used (settled as stranded).
import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { rateLimitHeaders } from "../src/quota/headers";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

// The day binds (fewer left than the minute's 60): X-RateLimit-* show the day window.
const POLICY = policyWith(60, 50);

describe("X-RateLimit-Remaining of a sparse key whose holder lost a stock with its eviction", () => {
  const time = mockClock(T0);
  const { passTime, passTo, forgetSleeps, uncounted } = backgroundWork(time);
  const keyId = "remaining_lost_stock";
  const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));

  const remainingShown = (a: HolderAnswer) =>
    a.reached ? Number(rateLimitHeaders(a.decision)["X-RateLimit-Remaining"]) : undefined;

  it("is the key's object's day remaining plus the permits the holder holds unused", async () => {
    const start = T0 + 45_000;
    await passTo(start);
    expect(allowedOf(await holder.admit(keyId, POLICY))).toBe(true);
    await passTo(start + 30_000); // the next minute's refill: a stock, and standing permits
    const heldBefore = await holder.unusedPermits();
    await evictDurableObject(uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS")));
    forgetSleeps();
    await passTo(start + 5 * MINUTE_MS);
    const a = await holder.admit(keyId, POLICY);
    expect(a.reached && a.fromStock && a.decision.outcome, "from a kept permit").toBe("allowed");
    // Everything the holder holds goes back: what the key's object still counts is used.
    await holder.giveBack(keyId);
    await passTime();
    const held = await holder.unusedPermits();
    const usage = await env.QUOTA.getByName(keyId).usage(POLICY);
    const truth = POLICY.perDay - usage.day.count;
    expect(heldBefore, "the refill's stock was held with the permits").toBeGreaterThan(held + 1);
    expect(remainingShown(a), "Remaining shown").toBe(truth);
    await passTime();
  });
});

const allowedOf = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";
