// A ban is the key's object's (docs/quotas.md): a location holder never admits a banned key's
// request from what it holds, standing permits for minutes to come included. The ban is not a
// new version of the key, so the object tells the holders holding leases when it begins.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { banKeyAtItsObject, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo } = backgroundWork(time);
const outcomeOf = (a: HolderAnswer) => (a.reached ? a.decision.outcome : "no decision");

describe("a ban that begins while a location holder holds permits", () => {
  it("is applied there from the holder's next request: standing permits for the minutes to come are not used", async () => {
    const keyId = "ban_reaches_holders";
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    // A key calling once a minute here: after its second request, standing permits.
    for (const at of [T0 + 2_000, T0 + 2_000 + MINUTE_MS]) {
      await passTo(at);
      expect(outcomeOf(await holder.admit(keyId, POLICY))).toBe("allowed");
      await passTime();
    }
    expect(await holder.unusedPermits()).toBeGreaterThan(0);
    // Elsewhere, the key keeps sending past its limit this minute, and is banned.
    await passTo(T0 + 2 * MINUTE_MS + 2_000);
    await banKeyAtItsObject(keyId, POLICY);
    await passTime();
    await passTo(T0 + 3 * MINUTE_MS + 2_000);
    expect(outcomeOf(await holder.admit(keyId, POLICY))).toBe("key_banned");
  });
});
