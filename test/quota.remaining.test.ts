// X-RateLimit-Remaining as a client reads it (docs/quotas.md, "Windows, headers, bans and
// failures"): for a key used in one location it goes down by exactly one per admitted request and
// reads 0 only when the next request will be refused; across locations it is at most heldBound
// below what the window really has left (and never above what it had left at the answering
// tier's last contact with the key's object, less what that tier admitted since). Real location holders and the key's
// object, simulated isolates, fake time with the background work (renewals, hand-backs, refills)
// run as it comes due.
import { describe, expect, it } from "vitest";
import { bindingWindow } from "../src/quota/headers";
import { heldBound } from "../src/quota/lease";
import { backgroundWork } from "./background-work";
import { isolateClientIn, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0 + 1_000);
const background = backgroundWork(time);
let seq = 0;

/** Sends one request through `client`, returning what its headers show (null: refused). */
async function remainingShown(
  client: ReturnType<typeof isolateClientIn>["client"],
  policy: ReturnType<typeof policyWith>,
) {
  const result = await client.admit(policy);
  expect(result.reached, "decided").toBe(true);
  if (!result.reached) return null;
  result.afterResponse?.catch(() => undefined);
  return result.decision.outcome === "allowed"
    ? bindingWindow(result.decision.windows).remaining
    : null;
}

describe("X-RateLimit-Remaining", () => {
  it.each([50, 400, 900])(
    "a free key's 60 requests one at a time from one location, %i ms apart: 59, 58, … 0, then refused",
    async (gapMs) => {
      const policy = policyWith(60, 10_000);
      const { client } = isolateClientIn(`remaining_one_${++seq}`, "AMS");
      const shown: (number | null)[] = [];
      for (let i = 0; i < 61; i++) {
        shown.push(await remainingShown(client, policy));
        time.now += gapMs;
        await background.passTime();
      }
      expect(shown).toEqual([...Array.from({ length: 60 }, (_, i) => 59 - i), null]);
    },
  );

  // The isolate's first request is decided by its location holder, the second (now busy) takes a
  // lease through it, which takes the holder's stock with it; after the minute's end the isolate
  // takes the next minute's lease straight from the key's object. The holder, whose permits the
  // isolate took, holds none for the new minute: its windows and the day stay exact.
  it("one isolate across a minute's end (two requests 1 ms before it, one 9 ms after): one less each time, in the minute and the day", async () => {
    const policy = policyWith(60, 100);
    const { client } = isolateClientIn(`remaining_turn_${++seq}`, "SIN");
    const minuteEnd = time.now - (time.now % 60_000) + 60_000;
    await background.passTo(minuteEnd - 1);
    const shown: string[] = [];
    const send = async () => {
      const result = await client.admit(policy);
      if (!result.reached || result.decision.outcome !== "allowed") return shown.push("refused");
      result.afterResponse?.catch(() => undefined);
      shown.push(result.decision.windows.map((w) => `${w.name} ${w.remaining}`).join(", "));
    };
    await send();
    await send();
    time.now = minuteEnd; // the holder's turn: what it does for the new minute
    await background.passTime();
    time.now = minuteEnd + 9;
    await background.passTime();
    await send();
    expect(shown).toEqual(["minute 59, day 99", "minute 58, day 98", "minute 59, day 97"]);
  });

  it("across locations: at most heldBound below what the minute has left", async () => {
    const policy = policyWith(60, 10_000);
    const keyId = `remaining_many_${++seq}`;
    const isolates = ["AMS", "FRA", "SIN"].flatMap((location) => [
      isolateClientIn(keyId, location).client,
      isolateClientIn(keyId, location).client,
    ]);
    let admitted = 0;
    for (let i = 0; admitted < 60 && i < 200; i++) {
      const client = isolates[(i * 7) % isolates.length]!;
      const shown = await remainingShown(client, policy);
      if (shown !== null) {
        admitted++;
        const truth = 60 - admitted;
        expect(shown, `request ${i}: at most heldBound below`).toBeGreaterThanOrEqual(
          truth - heldBound(policy),
        );
      }
      time.now += 40;
      await background.passTime();
    }
    expect(admitted).toBe(60);
  });

  // Remaining shown = truth + (admitted elsewhere since the answering tier's last contact) −
  // (permits held unused elsewhere at it). Never above the truth would take a far call per
  // response: a tier admitting from its own permits cannot know what other locations admit meanwhile.
  it("across locations: above the truth by what other locations admitted since the answering tier's last contact", async () => {
    const policy = policyWith(60, 10_000);
    const keyId = `remaining_above_${++seq}`;
    const ams = isolateClientIn(keyId, "AMS").client;
    const fra = isolateClientIn(keyId, "FRA").client;
    // AMS's holder forwards the first request and takes its stock: its contact with the object.
    expect(await remainingShown(ams, policy)).toBe(59);
    time.now += 500;
    const elsewhere = 5;
    for (let i = 0; i < elsewhere; i++) {
      expect(await remainingShown(fra, policy)).not.toBeNull();
      time.now += 300;
      await background.passTime();
    }
    // AMS admits its next request from its stock, without a contact: FRA held nothing when AMS
    // last heard from the object, so AMS shows the 5 FRA admitted since as still left.
    const truth = 60 - (2 + elsewhere);
    expect(await remainingShown(ams, policy)).toBe(truth + elsewhere);
  });

  // A sparse key's requests answered from standing permits (a gap of 30 s or more) on a plan whose
  // day binds first: the day counted the permits at their grant, and each request answered from
  // one is one less left, as for any request admitted from a lease.
  it("one location, a key calling every 40 s whose day binds: one less per request answered from standing permits", async () => {
    const policy = policyWith(60, 100);
    const { client } = isolateClientIn(`remaining_standing_${++seq}`, "AMS");
    // 45 requests at once-ish leave the day (55) below the next minute's 60.
    for (let i = 0; i < 45; i++) {
      expect(await remainingShown(client, policy)).toBe(Math.min(60, 100) - 1 - i);
      time.now += 50;
      await background.passTime();
    }
    // The isolate's own lease of the burst goes back (2 s), then the minute turns.
    time.now += 5_000;
    await background.passTime();
    const minuteEnd = time.now - (time.now % 60_000) + 60_000;
    await background.passTo(minuteEnd + 1_000);
    const shown: (number | null)[] = [];
    for (let i = 0; i < 8; i++) {
      shown.push(await remainingShown(client, policy));
      await background.passTo(time.now + 40_000);
    }
    expect(shown).toEqual(Array.from({ length: 8 }, (_, i) => 100 - 46 - i));
  });
});
