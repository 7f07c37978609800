// A ban is the key's object's (docs/quotas.md): "A holder never refuses on its own: out of stock,
// refused before, or near the limit, it forwards every request to the object until the minute,
// the refusal or the ban ends." The object tells the holders holding leases when a ban begins;
// here that push does not reach the holder (a holder that does not answer within the push's 2 s,
// a call that fails). The holder still learns of the ban from the key's object's own answer to a
// request it forwards (key_banned): from then on, until the ban ends, it admits nothing itself.
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName, QuotaHolder } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { banKeyAtItsObject, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo } = backgroundWork(time);
const outcomeOf = (a: HolderAnswer) => (a.reached ? a.decision.outcome : "no decision");

it("a holder that saw its key banned, the ban's push lost, admits nothing from its standing permits until the ban ends", async () => {
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
  const keyId = "ban_push_lost_standing";
  const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  // A key calling once a minute here: after its second request, standing permits.
  for (const at of [T0 + 2_000, T0 + 2_000 + MINUTE_MS]) {
    await passTo(at);
    expect(outcomeOf(await holder.admit(keyId, POLICY))).toBe("allowed");
    await passTime();
  }
  expect(await holder.unusedPermits(), "standing permits held").toBeGreaterThan(0);
  // The ban's push to this holder is lost.
  vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("push lost"));
  // Elsewhere, the key keeps sending past its limit this minute, and is banned (15 minutes).
  await passTo(T0 + 2 * MINUTE_MS + 2_000);
  await banKeyAtItsObject(keyId, POLICY);
  await passTime();
  // The key's requests here: the first takes this minute's standing permit (the holder does not
  // know of the ban yet), the next is forwarded and refused by the key's object: now it knows.
  await passTo(T0 + 2 * MINUTE_MS + 30_000);
  const unknowing = outcomeOf(await holder.admit(keyId, POLICY));
  await passTo(T0 + 2 * MINUTE_MS + 31_000);
  const seen = outcomeOf(await holder.admit(keyId, POLICY));
  expect([unknowing, seen], "the ban seen by the holder").toEqual(["allowed", "key_banned"]);
  await passTime();
  // Its requests in the minutes after, the ban (15 minutes) still on.
  const later: string[] = [];
  for (let m = 3; m <= 5; m++) {
    await passTo(T0 + m * MINUTE_MS + 5_000);
    later.push(outcomeOf(await holder.admit(keyId, POLICY)));
    await passTime();
  }
  expect(later, "every request after the holder saw the ban").toEqual([
    "key_banned",
    "key_banned",
    "key_banned",
  ]);
});
