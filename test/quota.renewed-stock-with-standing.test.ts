// A key seen once in a location gets, at the next minute's refill, a stock for that minute with
// standing permits for the minutes after it; the key's object waits for that stock as long as for
// the standing permits (StandingLedger.lend sets its expiry to theirs), and the holder, once the
// stock's minute is over, puts it aside to go back with them (StandingStock.keepWaiting).
// Here the stock is used up within its minute and renewed (a stock for the minute is renewed once
// used up): the renewal extends the same lease, and the holder still keeps it waiting for the
// standing permits. The requests it serves after the renewal are reported only with that
// hand-back, so they must be billed admitted when it arrives, whatever called the key's object
// meanwhile (docs/quotas.md, "Billing": every served request billed admitted, once).
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { holderName } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { leasesOutOf, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, uncounted } = backgroundWork(time);

/** The leases the key's object still waits for (test/helpers.ts). */
const leasesOut = (keyId: string) => leasesOutOf(uncounted(env.QUOTA, keyId));

it("a refill's stock granted with standing permits, renewed once used up: what it served after the renewal is billed admitted", async () => {
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  const keyId = "renewed_stock_with_standing";
  const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  const served: string[] = [];
  const admit = async (id: string, at: number, where = holder) => {
    await passTo(at);
    const answer = await where.admit(keyId, POLICY, null, id);
    expect(answer.reached && answer.decision.outcome, `request ${id}`).toBe("allowed");
    served.push(id);
    return answer;
  };

  // Seen once, 7 s before a minute ends: forwarded.
  await admit("first", T0 + 53_000);
  // The minute turns: the refill brings that minute's stock (2) and standing permits after it.
  const refillMinute = T0 + MINUTE_MS;
  await passTo(refillMinute + 500);
  const afterRefill = await leasesOut(keyId);
  expect(afterRefill[0], "the refill's stock").toMatchObject({
    minuteStart: refillMinute,
    permits: 2,
  });
  const standingEnd = Math.max(...afterRefill.map((l) => l.minuteStart)) + MINUTE_MS;
  expect(standingEnd, "standing permits for the minutes after it").toBeGreaterThan(
    refillMinute + 2 * MINUTE_MS,
  );

  // Two requests use the stock up; the second sends its renewal (the key's gap fits the minute).
  const a = await admit("a", refillMinute + 1_000);
  const b = await admit("b", refillMinute + 5_000);
  expect(a.reached && a.fromStock && b.reached && b.fromStock, "from the stock").toBe(true);
  await passTime(); // the renewal's answer
  const renewed = (await leasesOut(keyId)).find((l) => l.minuteStart === refillMinute);
  expect(renewed?.permits, "the same lease, renewed").toBeGreaterThan(2);
  // One more request, served by what the renewal added; then the key goes quiet here.
  const c = await admit("c", refillMinute + 9_000);
  expect(c.reached && c.fromStock, "c from the renewed stock").toBe(true);

  // Past the stock's minute (put aside to go back with the standing permits) and 30 s more, the
  // key is used in a second location: a request forwarded to the key's object.
  await admit(
    "elsewhere",
    refillMinute + MINUTE_MS + STRANDED_AFTER_MS + 10_000,
    env.QUOTA_HOLDER.getByName(holderName(keyId, "LHR")),
  );

  // Every standing permit's minute over, everything handed back, every deadline past.
  await passTo(standingEnd + 12 * MINUTE_MS);
  expect(await leasesOut(keyId), "every lease settled").toEqual([]);
  const { days } = await env.QUOTA.getByName(keyId).report(POLICY);
  expect(days[0], `billed: the ${served.length} requests served, nothing stranded`).toMatchObject({
    admitted: served.length,
    stranded: 0,
  });
});
