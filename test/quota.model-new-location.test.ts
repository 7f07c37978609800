// Sharing the bound with a location new to a key, in the quota model (test/model/quota-model.ts):
// a key used alone in one location (its stock for the minute sized to the whole bound), then in
// another, with the restock pushes and the refills they start delivered, lost, held or repeated;
// the model's invariants checked after every command and the bill at the end.
import { describe, expect, it } from "vitest";
import { mockClock, T0 } from "./helpers";
import type { Fault } from "./model/network";
import { Advance, Arm, fixedListRunner, NewLocation, PLANS, Release } from "./model/quota-model";

const time = mockClock(T0);

/** Runs `commands` on a key of `PLANS[plan]`, heals and bills: the invariants broken, if any. */
const violationsOf = fixedListRunner(time, T0 + 5_000);

const FREE = PLANS.findIndex((p) => p.perMinute === 60 && p.perDay === 200);

describe("sharing the bound with a new location, in the quota model", () => {
  it("keeps every invariant when the pushes arrive", { timeout: 60_000 }, async () => {
    expect(
      await violationsOf(FREE, [new NewLocation(0, 4, 300), new Advance("ms", 2_000)]),
    ).toEqual([]);
  });

  it.each<Fault>(["loseBefore", "loseAfter", "holdCall", "holdAnswer", "duplicate"])(
    "keeps every invariant with a restock push %s",
    { timeout: 60_000 },
    async (fault) => {
      const commands = [
        new Arm("holder", "restock", fault),
        new NewLocation(2, 3, 200),
        new Release(0),
        new NewLocation(4, 2, 1_000),
        new Advance("minuteEnd", 10),
        new NewLocation(0, 2, 50),
      ];
      expect(await violationsOf(FREE, commands)).toEqual([]);
    },
  );

  it("keeps every invariant with the first location's refill lost after the key's object granted it", {
    timeout: 60_000,
  }, async () => {
    const commands = [
      new NewLocation(0, 1, 100),
      new Arm("object", "renewLease", "loseAfter"),
      new NewLocation(2, 3, 400),
      new Advance("ms", 3_000),
    ];
    expect(await violationsOf(FREE, commands)).toEqual([]);
  });
});
