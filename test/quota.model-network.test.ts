// The quota model's own network (test/model/network.ts) on the seams it must not hang on: a run
// whose faults leave something held when it ends, and a step that never finishes. A model run
// that stops making progress fails with what it waits for (a counterexample fast-check shrinks
// and replays), never hangs the test until its timeout.
import type fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mockClock, T0 } from "./helpers";
import {
  Advance,
  Arm,
  ChangeKey,
  FREE_PLAN,
  Latency,
  type ModelRun,
  modelWorld,
  OneAtATime,
  PLANS,
  type QuotaModel,
  type QuotaReal,
  Request,
  runCommands,
  settleAndBill,
  violationsOfCommands,
} from "./model/quota-model";

const time = mockClock(T0);

/** Runs `commands` once in a fresh world (the free plan): the model and real side it ran on. */
async function runInWorld(commands: fc.AsyncCommand<QuotaModel, QuotaReal>[]): Promise<ModelRun> {
  const { ran, thrown } = await runCommands(time, T0 + 5_000, FREE_PLAN, commands);
  if (thrown) throw thrown;
  return ran;
}

describe("the quota model's network", () => {
  it("heals a run whose released call is answered into a held answer, and bills it", {
    timeout: 60_000,
  }, async () => {
    // A holder's admit whose answer is to be held waits for its own call to the key's object,
    // held before it arrives: the heal releases that call, and only then is the holder's answer
    // held (its fault fired before the heal).
    const { model, real } = await runInWorld([
      new Arm("object", "admit", "holdCall"),
      new Arm("holder", "admit", "holdAnswer"),
      new Request(2, 1),
    ]);
    expect(real.net.held.map((h) => h.label)).toEqual([
      expect.stringMatching(/^call object model_\d+_\d+\.admit$/),
    ]);
    await settleAndBill(model, real);
    expect(real.net.held).toEqual([]);
    expect(real.pending.size).toBe(0);
    expect(model.violations).toEqual([]);
  });

  it("delivers a call between a location and the key's object after its round trip of fake time, and at once when the network heals", {
    timeout: 60_000,
  }, async () => {
    const { model, real } = await runInWorld([
      new Latency(0, 600),
      new Latency(1, 600),
      new OneAtATime(0, 1, 10),
      new Request(2, 1),
    ]);
    // One at a time waits for its answer: the holder's call to the key's object, there and back.
    expect(model.trueNow - (T0 + 5_000)).toBe(600);
    expect(model.violations).toEqual([]);
    // A request in another location: its holder has no stock, and its call is on its way until
    // time moves (or the network heals).
    expect(real.net.describe()).toMatch(/object model_\d+_\d+\.\w+: on its way \(300 ms\)/);
    expect(real.pending.size).toBe(1);
    await settleAndBill(model, real);
    expect(real.pending.size).toBe(0);
    expect(model.violations).toEqual([]);
  });

  // An isolate renews its own lease ahead by what its renewals take: here they take 150 ms,
  // then longer than the lease lives, then 40 ms, with a change to the key pushed (to a holder
  // 800 ms away) while they are slow, and the minute's last second.
  it("keeps every invariant for a busy isolate whose round trip to the key's object grows past its lease's life and shrinks again", {
    timeout: 60_000,
  }, async () => {
    const plan = PLANS.findIndex((p) => p.perMinute === 120);
    const violations = await violationsOfCommands(time, T0 + 5_000, plan, [
      new Latency(0, 150),
      new OneAtATime(0, 12, 200),
      new Latency(0, 1_600),
      new OneAtATime(0, 8, 200),
      new ChangeKey("planDown", 0),
      new OneAtATime(0, 8, 200),
      new Latency(0, 40),
      new OneAtATime(0, 12, 100),
      new Advance("minuteEnd", -1_500),
      new OneAtATime(0, 8, 150),
    ]);
    expect(violations).toEqual([]);
  });

  it("fails a step that never finishes, naming the calls held and not answered", {
    timeout: 30_000,
  }, async () => {
    const { net, setup } = modelWorld(time, T0 + 5_000);
    const { real } = setup();
    const holder = real.isolates[2]!;
    net.armed.push({ tier: "holder", method: "admit", fault: "holdCall" });
    const never = holder.client.admit(holder.policy);
    const stuck = await net.finishOrStuck("a request held forever", never, 300).then(
      () => "finished",
      (err: unknown) => String(err),
    );
    expect(stuck).toMatch(/^Error: stuck: a request held forever did not finish within 300 ms/);
    expect(stuck).toMatch(
      /calls not answered:\n {2}holder model_\d+_\d+@FRA\.admit \(holdCall\): held before it arrives/,
    );
    expect(stuck).toMatch(/held:\n {2}call holder model_\d+_\d+@FRA\.admit, held 0 ms ago/);
    // The run's settling loops end once it is given up.
    await expect(net.settle()).rejects.toThrow("the run was given up as stuck");
    await net.heal().catch(() => undefined);
  });
});
