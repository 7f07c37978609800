// A location holder hands its stock to an isolate's call (admitForIsolate surrenders it: the
// isolate's call to the key's object takes it back) while the holder's own renewal of that stock
// is on its way. The renewal extends the stock's lease at the key's object, and its answer finds
// the stock no longer in use: the extension goes back in a hand-back of its own. That hand-back
// and the isolate's call race to the key's object; whichever arrives first settles the lease, so
// each must report what the lease served. Driven against the key's real QuotaLimiter, with the
// holder's lease holder and the order of the calls in the test's hands.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { QUIET_STOCK } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Renewal, ReturnedLease } from "../src/quota/lease-messages";
import { closedGate, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0 + 5_000);

it.each([
  ["the extension's hand-back", true],
  ["the isolate's call", false],
] as const)(
  "a stock surrendered while its renewal is on its way is counted and billed whole when %s arrives first",
  async (_first, extensionFirst) => {
    const keyId = `surrendered_stock_${extensionFirst ? "extension" : "isolate"}_first`;
    const grantee = `${keyId}@AMS`;
    const stub = env.QUOTA.getByName(keyId);
    const policy = policyWith(60, 1_000);
    const answerHeld = closedGate();
    const renewals: Promise<Renewal>[] = [];
    const handBacks: ReturnedLease[] = [];
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(policy, request, grantee),
      giveBack: async (returned) => {
        handBacks.push(returned);
        await stub.returnLease(returned);
      },
      // Reaches the key's object at once; its answer is held on the way back.
      renew: async (request) => {
        const answer = stub.renewLease(policy, request, grantee);
        renewals.push(answer);
        const renewal = await answer;
        await answerHeld.gate;
        return renewal;
      },
    };
    const holder = new LeaseHolder({ stock: QUIET_STOCK });
    let admitted = 0;
    let renewal: Promise<boolean> | null = null;
    for (let i = 0; i < 10 && !renewal; i++) {
      time.now += 100;
      const decided = await holder.admit(policy, calls, `admission-${i}`);
      if (decided.decision.outcome === "allowed") admitted++;
      renewal = decided.renewal;
    }
    expect(renewal, "the stock is renewed as it runs low").not.toBeNull();
    const extended = await renewals[0]!;
    expect(extended.granted, "the renewal extends the stock's own lease").not.toBeNull();

    // An isolate here asks for a lease of its own: the holder surrenders its stock to that call,
    // which is still on its way to the key's object when the renewal's answer comes back.
    const surrendered = holder.surrender();
    expect(surrendered.map((r) => r.id)).toContain(extended.granted!.id);
    // The isolate's call takes the surrendered stock back, before or after the extension's hand-back.
    if (!extensionFirst) await stub.returnLease(surrendered[0]!);
    answerHeld.open();
    await holder.giveBackAfterRenewal(renewal!, calls);
    expect(
      handBacks.map((r) => r.id),
      "the extension went back on its own",
    ).toContain(extended.granted!.id);
    if (extensionFirst) await stub.returnLease(surrendered[0]!);
    expect(holder.unusedPermits).toBe(0);

    const { usage, days } = await stub.report(policy);
    expect(usage.minute.count, "the minute counts every request served").toBe(admitted);
    expect(usage.day.count).toBe(admitted);
    expect(days[0]?.admitted, "every request served is billed as admitted").toBe(admitted);
  },
);
