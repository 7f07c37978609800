// The quota protocol under fast-check's scheduler (fc.scheduler()): rounds of concurrent work
// (requests from several isolates, a change to the key, usage reads that hand leases and stock
// back, then time moving on: renewals, hand-backs at expiry) against the real key's object,
// location holders and isolates' lease holders, with every call between the tiers and every
// answer, from an isolate or from inside an object, let go on in an order the scheduler picks.
// After every round the invariants of test/model/quota-model.ts; at the end of each run, the bill.
// CI runs a fixed budget; `npm run test:model -- --runs N --seed S [--path P] --file
// test/quota.model-scheduled.test.ts` runs longer or replays a counterexample.
import fc from "fast-check";
import { describe, it } from "vitest";
import { mockClock, T0 } from "./helpers";
import { checkModelOrFail, modelRunOf } from "./model/model-run";
import {
  modelWorld,
  runScheduledRounds,
  scheduledRounds,
  settleAndBill,
} from "./model/quota-model";

/** CI's budget: this many runs from this seed, and never more than this long. */
const CI_RUNS = 30;
const CI_SEED = 26;
const MODEL_BUDGET_MS = 10_000;

const time = mockClock(T0);

const parameters = () => modelRunOf({ runs: CI_RUNS, seed: CI_SEED });

describe("the quota protocol under fc.scheduler (every call and answer between the tiers in an order it picks)", () => {
  it("keeps every invariant over concurrent rounds", { timeout: 600_000 }, async () => {
    const run = parameters();
    const { setup } = modelWorld(time, T0 + 5_000);
    const property = fc.asyncProperty(fc.scheduler(), scheduledRounds(), async (s, rounds) => {
      const { model, real } = setup();
      await runScheduledRounds(s, model, real, rounds);
      await settleAndBill(model, real);
      if (model.violations.length)
        throw new Error(`invariant broken at the end:\n${model.violations.join("\n")}`);
    });
    await checkModelOrFail(property, run, {
      budgetMs: MODEL_BUDGET_MS,
      replayCommand: (seed, path) =>
        `npm run test:model -- --seed ${seed} --path ${path} --file test/quota.model-scheduled.test.ts`,
      show: (c) => fc.stringify(c),
    });
  });
});
