// The model files' time budget (test/model/model-run.ts): a run that has started when the budget
// ends finishes before the check returns, so none goes on into the next test of its file (moving
// its fake time, or calling its objects while that test waits for them to settle).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkModelOrFail, type ModelRun } from "./model/model-run";

const ciRun: ModelRun = { runs: 100, seed: 1, path: undefined, replayPath: undefined, long: false };
const RUN_MS = 50;
const BUDGET_MS = 120;

describe("a model check's time budget", () => {
  it("stops starting runs once it has passed, and returns only after the run in progress", async () => {
    let running = 0;
    let finished = 0;
    const property = fc.asyncProperty(fc.nat(), async () => {
      running++;
      await new Promise((resolve) => setTimeout(resolve, RUN_MS));
      running--;
      finished++;
    });
    await checkModelOrFail(property, ciRun, {
      budgetMs: BUDGET_MS,
      replayCommand: () => "",
      show: String,
    });
    expect(running, "runs still going after the check returned").toBe(0);
    expect(finished).toBeGreaterThanOrEqual(Math.floor(BUDGET_MS / RUN_MS));
    expect(finished, "runs cut by the budget").toBeLessThan(ciRun.runs);
  });
});
