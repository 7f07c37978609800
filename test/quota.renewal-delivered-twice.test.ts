// A lease renewal is never retried (a second one would count its permits again), but the network
// may still deliver one twice. Each renewal a holder sends carries its own id, so the key's object
// grants it once: with everything handed back, the windows count just the admitted requests.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { RenewalRequest } from "../src/quota/lease-messages";
import { admitUntilRenewal, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);

it("a renewal delivered twice to the key's object is granted and counted once", async () => {
  const stub = env.QUOTA.getByName("renewal_delivered_twice_1");
  const policy = policyWith(6_000, 1_000_000);
  const sent: RenewalRequest[] = [];
  const countedAfter: number[] = [];
  const calls: LeaseCalls = {
    admit: (request) => stub.admit(policy, request),
    giveBack: (returned) => stub.returnLease(returned),
    renew: async (request) => {
      sent.push(request);
      await stub.renewLease(policy, request); // delivered, its answer lost on the way
      countedAfter.push((await stub.usage()).minute.count);
      const again = await stub.renewLease(policy, request); // the same message delivered again
      countedAfter.push((await stub.usage()).minute.count);
      return again;
    },
  };
  const holder = new LeaseHolder();
  const { renewal, admitted } = await admitUntilRenewal(holder, policy, calls, time, {
    stepMs: 50,
    most: 200,
  });
  expect(await renewal).toBe(true);
  expect(sent).toHaveLength(1);
  expect(countedAfter[1], "the second delivery counts nothing more").toBe(countedAfter[0]);
  expect(sent[0]!.renewalId).toEqual(expect.any(String));
  holder.dropLease();
  await holder.giveBackRetired(calls);
  expect(holder.unusedPermits).toBe(0);
  expect((await stub.usage()).minute.count).toBe(admitted);
});
