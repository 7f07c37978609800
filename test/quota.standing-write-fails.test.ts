// A location holder writes each standing permit it takes to its own storage before it answers
// (holder-standing-memory.ts), so that a holder evicted and constructed again never uses the
// permit a second time. When that write fails, the holder must not answer from the permit: it
// answers unreached, and the isolate asks the key's object instead (counted there once, by its
// admission id).
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { holderName } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTo, uncounted } = backgroundWork(time);

describe("a standing permit whose write to the holder's storage fails", () => {
  it("is not answered from: the holder answers unreached, so the isolate asks the key's object", async () => {
    const keyId = "standing_write_fails";
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    const start = T0 + 45_000;
    await passTo(start);
    const first = await holder.admit(keyId, POLICY);
    expect(first.reached && first.decision.outcome).toBe("allowed");
    await passTo(start + 30_000); // the next minute's refill brings standing permits
    expect(await holder.unusedPermits()).toBeGreaterThan(0);
    await runInDurableObject(
      uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS")),
      (_instance, state) => {
        const kv = state.storage.kv;
        kv.put = () => {
          throw new Error("disk full");
        };
      },
    );
    await passTo(start + 60_000);
    const answer = await holder.admit(keyId, POLICY);
    expect(answer.reached, "not decided from the permit whose use was not written").toBe(false);
  });
});
