// What the key's object remembers of the location holders sharing its heldBound, and how it asks
// them to share (src/objects/stock-sharing.ts): pure, with holders that answer as each test says.
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import type { QuotaHolder } from "../src/objects/quota-holder";
import { askToShare, PUSH_DEADLINE_MS, StockSharing } from "../src/objects/stock-sharing";
import { STOCK_SHARED_WITHIN_MS } from "../src/quota/lease";
import type { SharedStock } from "../src/quota/lease-messages";
import { T0 } from "./helpers";

describe("a location holder asking for permits", () => {
  it("is alone when no other holder nor isolate asked within STOCK_SHARED_WITHIN_MS; an isolate never is", () => {
    const sharing = new StockSharing();
    expect(sharing.noteAsking("k@AMS", T0)).toBe(true);
    expect(sharing.noteAsking("k@AMS", T0 + 1_000), "asking again, still alone").toBe(true);
    expect(sharing.noteAsking("k@LHR", T0 + 2_000), "AMS asked 2 s before").toBe(false);
    expect(sharing.noteAsking("k@AMS", T0 + 3_000), "LHR asked 1 s before").toBe(false);
    expect(sharing.noteAsking(null, T0 + 4_000), "an isolate").toBe(false);
    expect(sharing.noteAsking("k@AMS", T0 + 5_000), "an isolate asked 1 s before").toBe(false);
    expect(new StockSharing().noteAsking(null, T0), "an isolate, the first to ask").toBe(false);
  });

  it("forgets the others exactly STOCK_SHARED_WITHIN_MS after they last asked", () => {
    const sharing = new StockSharing();
    sharing.noteAsking("k@LHR", T0);
    expect(sharing.noteAsking("k@AMS", T0 + STOCK_SHARED_WITHIN_MS - 1)).toBe(false);
    const fresh = new StockSharing();
    fresh.noteAsking("k@LHR", T0);
    expect(fresh.noteAsking("k@AMS", T0 + STOCK_SHARED_WITHIN_MS)).toBe(true);
    expect(fresh.noteAsking("k@AMS", T0 + 2 * STOCK_SHARED_WITHIN_MS + 1)).toBe(true);
  });
});

describe("the sharing asked for", () => {
  const sharingFor = (waiting: string) => ({ waiting, sharers: ["k@FRA"], tellWaiting: false });

  it("is remembered per waiting holder for its minute only, and taken once", () => {
    const sharing = new StockSharing();
    sharing.ask(sharingFor("k@AMS"), T0);
    sharing.ask(sharingFor("k@LHR"), T0);
    expect(sharing.askedThisMinute("k@AMS", T0)).toBe(true);
    expect(sharing.askedThisMinute("k@LHR", T0)).toBe(true);
    expect(sharing.askedThisMinute("k@CDG", T0)).toBe(false);
    expect(sharing.askedThisMinute("k@AMS", T0 + MINUTE_MS)).toBe(false);
    expect(sharing.take()).toEqual(sharingFor("k@LHR"));
    expect(sharing.take()).toBeNull();
    sharing.ask(sharingFor("k@LHR"), T0 + MINUTE_MS);
    expect(sharing.askedThisMinute("k@LHR", T0 + MINUTE_MS)).toBe(true);
  });

  it("under way for a holder is what its refill waits for, until it settles", async () => {
    const sharing = new StockSharing();
    let settle = () => {};
    const underWay = new Promise<void>((resolve) => {
      settle = resolve;
    });
    sharing.underWay("k@AMS", underWay);
    expect(sharing.heldFor("k@AMS")).toBeInstanceOf(Promise);
    expect(sharing.heldFor("k@LHR")).toBeUndefined();
    expect(sharing.heldFor(null)).toBeUndefined();
    settle();
    await sharing.heldFor("k@AMS");
    expect(sharing.heldFor("k@AMS"), "forgotten once settled").toBeUndefined();
  });
});

/** Location holders whose `restock` answers as `answers` says (by name), recording who was asked. */
function holdersAnswering(answers: Record<string, () => Promise<SharedStock | null>>) {
  const asked: string[] = [];
  const holders = {
    getByName: (name: string) => ({
      restock: (_keyId: string) => {
        asked.push(name);
        return answers[name]!();
      },
    }),
  } as unknown as DurableObjectNamespace<QuotaHolder>;
  return { holders, asked };
}

describe("asking location holders to share", () => {
  it("gives what the sharers gave up, none for one that gave nothing or failed, then tells the waiting one", async () => {
    const { holders, asked } = holdersAnswering({
      "k@FRA": async () => ({ id: "l1", seen: 10, cut: 4 }),
      "k@LHR": async () => null,
      "k@CDG": async () => {
        throw new Error("unreachable");
      },
      "k@AMS": async () => null,
    });
    const taken: SharedStock[][] = [];
    await askToShare(
      holders,
      "k",
      { waiting: "k@AMS", sharers: ["k@FRA", "k@LHR", "k@CDG"], tellWaiting: true },
      (shared) => taken.push(shared),
    );
    expect(taken).toEqual([[{ id: "l1", seen: 10, cut: 4 }]]);
    expect(asked).toEqual(["k@FRA", "k@LHR", "k@CDG", "k@AMS"]);
  });

  it("past PUSH_DEADLINE_MS with a sharer not answering: gives nothing, and still tells the waiting one", async () => {
    const { holders, asked } = holdersAnswering({
      "k@FRA": () => new Promise(() => {}),
      "k@AMS": async () => null,
    });
    const taken: SharedStock[][] = [];
    const started = Date.now();
    await askToShare(
      holders,
      "k",
      { waiting: "k@AMS", sharers: ["k@FRA"], tellWaiting: true },
      (shared) => taken.push(shared),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(PUSH_DEADLINE_MS - 50);
    expect(taken).toEqual([[]]);
    expect(asked).toEqual(["k@FRA", "k@AMS"]);
  });
});
