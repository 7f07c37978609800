// A key seen once in a location: its first request is forwarded and brings a stock, and the next
// minute's refill brings a stock for that minute with standing permits for the minutes after it.
// The refill's stock, once its minute is over, waits for those standing permits: it goes back
// with them, in one call, and the key's object waits for it as long. A holder evicted from memory
// (idle: 70 to 140 s in production) keeps its standing permits in storage and its alarm hands them
// back after their last minute: the stock waiting with them goes back in that call too, with the
// requests it served, billed admitted. (A holder evicted within the stock's own minute loses it,
// as any stock in use: stranded 30 s after their last minute. Only `wrangler dev`, which evicts an
// idle object after about 10 s, does that to a key calling every few minutes.)
import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { holderName } from "../src/objects/quota-holder";
import { GIVE_BACK_GRACE_MS } from "../src/quota/lease";
import { backgroundWork } from "./background-work";
import { alarmOf, leasesOutOf, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, forgetSleeps, uncounted } = backgroundWork(time);

/** The leases the key's object still waits for (test/helpers.ts). */
const leasesOut = (keyId: string) => leasesOutOf(uncounted(env.QUOTA, keyId));

/** The key's first request 7 s before a minute ends, then that minute's turn: the refill. */
async function refilledWithStanding(keyId: string) {
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  // Its only request (the tester's key: a burst of usage reads, then one request): forwarded,
  // with a stock of 2 for the rest of that minute.
  await passTo(T0 + 53_000);
  const first = await holder.admit(keyId, POLICY, null, "only");
  expect(first.reached && first.decision.outcome).toBe("allowed");
  // The minute turns: the refill hands the first stock back and brings the minute's stock, with
  // standing permits for the minutes after it (a key seen once: sized at a 30 s gap).
  const refillMinute = T0 + MINUTE_MS;
  await passTo(refillMinute + 1_000);
  const granted = await leasesOut(keyId);
  expect(granted[0], "the refill's stock, of its minute").toEqual({
    minuteStart: refillMinute,
    permits: 2,
  });
  expect(granted.length, "and standing permits for the minutes after it").toBeGreaterThan(1);
  const standingEnd = Math.max(...granted.map((l) => l.minuteStart)) + MINUTE_MS;
  return { holder, refillMinute, standingEnd };
}

it("a key seen once: the refill's stock goes back with the standing permits granted with it", async () => {
  const keyId = "refill_stock_handed_back";
  const { holder, standingEnd } = await refilledWithStanding(keyId);
  // The last standing minute ends; the holder hands back all it holds 250 ms on.
  await passTo(standingEnd + GIVE_BACK_GRACE_MS + 1_000);
  expect(await holder.unusedPermits(), "the holder holds nothing").toBe(0);
  expect(await leasesOut(keyId), "every lease handed back, none left to strand").toEqual([]);
  const { days } = await env.QUOTA.getByName(keyId).report(POLICY);
  expect(days[0], "billed: the one request served").toMatchObject({ admitted: 1, stranded: 0 });
});

it("its holder evicted after the stock's minute: the alarm hands the stock back with the standing permits, what it served billed admitted", async () => {
  const keyId = "refill_stock_evicted";
  const { holder, refillMinute, standingEnd } = await refilledWithStanding(keyId);
  // A second request in the refill's minute, answered from its stock.
  await passTo(refillMinute + 10_000);
  const second = await holder.admit(keyId, POLICY, null, "second");
  expect(second.reached && second.fromStock, "answered from the refill's stock").toBe(true);
  // The stock's minute ends: it waits for the standing permits. The holder then idles and is
  // evicted (a call first: the storage write owed since the last background work, which this
  // test's fake time woke from outside the object, is made at the holder's next call).
  await passTo(refillMinute + MINUTE_MS + 10_000);
  expect(
    await holder.unusedPermits(),
    "the stock's 1 left and the standing permits",
  ).toBeGreaterThan(1);
  const evicted = uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS"));
  await evictDurableObject(evicted);
  forgetSleeps();
  // The holder's alarm, after the standing permits' last minute, hands back all it kept.
  const handBackAt = await alarmOf(evicted);
  expect(handBackAt, "the holder's alarm, after their last minute").toBeGreaterThan(standingEnd);
  await passTo(handBackAt!);
  expect(await runDurableObjectAlarm(evicted)).toBe(true);
  await passTime();
  expect(await leasesOut(keyId), "every lease handed back, the stock too").toEqual([]);
  // Past every stranding deadline: nothing was left to strand.
  await passTo(standingEnd + STRANDED_AFTER_MS + MINUTE_MS);
  const { days } = await env.QUOTA.getByName(keyId).report(POLICY);
  expect(days[0], "billed: both requests served, nothing stranded").toMatchObject({
    admitted: 2,
    stranded: 0,
  });
});
