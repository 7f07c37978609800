// The quota protocol as a model: fast-check generates command lists (requests in 3 locations ×
// 2 isolates, time moving across minute and day ends, faults on every call between the tiers,
// evictions, changes to the key) and runs them against the real QuotaLimiter and QuotaHolder
// objects and the isolates' lease holders, checking after every command that no window admits
// past its limit, that what the object counted and nobody served stays within heldBound, that no
// request sent after a change's bound is admitted under the old policy, and, at the end of each
// run, that every served request is billed once as admitted and unserved permits only as
// stranded. See test/model/quota-model.ts. CI runs a fixed budget (MODEL_RUNS runs from a fixed
// seed, at most MODEL_BUDGET_MS); `npm run test:model -- --runs N --seed S [--path P]` runs
// longer or replays a counterexample.
import fc from "fast-check";
import { describe, it } from "vitest";
import { mockClock, T0 } from "./helpers";
import { WINDOWS_ONLY_MOVE_FORWARD } from "./model/flags";
import { checkModelOrFail, modelRunOf } from "./model/model-run";
import { modelWorld, PLANS, quotaCommands, settleAndBill } from "./model/quota-model";

/** CI's budget: this many runs from this seed, and never more than this long. */
const CI_RUNS = 40;
const CI_SEED = 26;
const MODEL_BUDGET_MS = 16_000;

const time = mockClock(T0);

const parameters = () => modelRunOf({ runs: CI_RUNS, seed: CI_SEED });

describe("the quota protocol as a model (fast-check commands against the real tiers)", () => {
  it("keeps every invariant over random command lists", { timeout: 600_000 }, async () => {
    const run = parameters();
    const { replayPath } = run;
    const { setup } = modelWorld(time, T0 + 5_000);
    const property = fc.asyncProperty(
      // The key's plan at the start (an index in PLANS).
      fc.nat({ max: PLANS.length - 1 }),
      fc.commands(quotaCommands({ stepsBack: WINDOWS_ONLY_MOVE_FORWARD }), {
        maxCommands: 40,
        ...(replayPath ? { replayPath } : {}),
      }),
      async (plan, cmds) => {
        let world: ReturnType<typeof setup> | null = null;
        await fc.asyncModelRun(() => {
          world = setup(plan);
          return world;
        }, cmds);
        const { model, real } = world!;
        await settleAndBill(model, real);
        if (model.violations.length)
          throw new Error(`invariant broken at the end:\n${model.violations.join("\n")}`);
      },
    );
    await checkModelOrFail(property, run, {
      budgetMs: MODEL_BUDGET_MS,
      replayCommand: (seed, path) =>
        `npm run test:model -- --seed ${seed} --path ${path} --replay <the replayPath below> --file test/quota.model.test.ts`,
      show: (c) => `plan ${c ? fc.stringify(PLANS[c[0]]) : "?"}: ${String(c?.[1])}`,
    });
  });
});
