// A location holder asked to decide a request on a copy of the key older than its object's policy
// (a change made elsewhere) answers `stale`, counting nothing; the Worker then reads the key again
// and asks with the same admission id. The holder must decide that repeat afresh, under the key
// as it is now, not repeat the `stale` it remembered for the id (the request would end in 503).
import { env } from "cloudflare:workers";
import { beforeEach, expect, it, vi } from "vitest";
import { holderName } from "../src/objects/quota-holder";
import { mockClock, policyWith, T0 } from "./helpers";

mockClock(T0);

beforeEach(() => {
  for (const level of ["log", "warn"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});

it("a location holder decides afresh an admission id it answered `stale`", async () => {
  const keyId = "stale_copy_decided_again_1";
  const before = policyWith(60, 1_000, { version: 1 });
  const now = policyWith(300, 10_000, { version: 2 });
  const object = env.QUOTA.getByName(keyId);
  // The key's object has the newer policy (the change reached it, not this copy).
  await object.admit(now, { want: 0, returning: [], admissionId: "elsewhere" });
  const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  const first = await holder.admit(keyId, before, null, "req-1");
  expect(first.reached && first.decision.outcome).toBe("stale");
  const again = await holder.admit(keyId, now, null, "req-1");
  expect(again.reached && again.decision.outcome).toBe("allowed");
  await holder.giveBack(keyId);
  expect((await object.usage()).minute.count).toBe(2);
});
