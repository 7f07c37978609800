import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, evictHolder } = backgroundWork(time);

const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

describe("a location holder asked again its own admission id 30 s after the key's object decided it", () => {
  it("admits no more in the next minute than its limit (by the key's object's clock)", async () => {
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const keyId = "stale_now_1";
    const holder = holderOf(keyId);
    // A key's first request here at 45 s into a minute, then one 90 s on (the next minute's
    // refill failing meanwhile): forwarded, granted a stock for the minute.
    await passTo(T0 + 45_000);
    expect(allowed(await holder.admit(keyId, POLICY, null, "first"))).toBe(true);
    const renew = vi.spyOn(QuotaLimiter.prototype, "renewLease").mockImplementation(() => {
      throw new Error("the key's object is unreachable");
    });
    await passTo(T0 + 61_000);
    renew.mockRestore();
    await passTo(T0 + 135_000);
    const decided = vi.spyOn(QuotaLimiter.prototype, "admit");
    expect(allowed(await holder.admit(keyId, POLICY, null, "second"))).toBe(true);
    const lease = (await decided.mock.results.at(-1)?.value)?.lease;
    decided.mockRestore();
    expect(lease?.expiresAt, "a stock for the minute, to its end").toBe(T0 + 3 * MINUTE_MS);
    // Its answer lost on the way to the isolate, the holder evicted; asked again 30 s on.
    await evictHolder(keyId);
    await passTo(T0 + 165_000);
    expect(allowed(await holder.admit(keyId, POLICY, null, "second"))).toBe(true);
    await passTime();
    // The next minute (T0 + 3 min by the key's object's clock): 70 requests in its first 7 s.
    const minute = T0 + 3 * MINUTE_MS;
    let admitted = 0;
    for (let i = 0; i < 70; i++) {
      time.now = minute + 1_000 + i * 100;
      if (allowed(await holder.admit(keyId, POLICY, null, `m-${i}`))) admitted++;
    }
    expect(time.now).toBeLessThan(minute + MINUTE_MS);
    expect(admitted, "admitted in one minute of a key allowing 60").toBeLessThanOrEqual(60);
  });
});
