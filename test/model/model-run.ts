// How each model file runs: CI's fixed budget, or the runs, seed, path and replay that
// `npm run test:model` (scripts/test-model.mjs) passes through the test environment; and one
// check that fails with the command replaying its counterexample.
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { expect } from "vitest";

export interface ModelRun {
  runs: number;
  seed: number;
  path: string | undefined;
  replayPath: string | undefined;
  /** Given runs by hand: no time limit. */
  long: boolean;
}

/** The run's parameters: CI's (`ci`), unless npm run test:model gave others. */
export function modelRunOf(ci: { runs: number; seed: number }): ModelRun {
  const given = env as unknown as Record<string, string | undefined>;
  return {
    runs: Number(given.MODEL_RUNS || ci.runs),
    seed: Number(given.MODEL_SEED || ci.seed),
    path: given.MODEL_PATH || undefined,
    replayPath: given.MODEL_REPLAY || undefined,
    long: Boolean(given.MODEL_RUNS),
  };
}

/**
 * `property`, whose runs stop starting once `budgetMs` has passed (fast-check reports the check
 * interrupted). A run already going finishes: fast-check's own time limit would leave it going,
 * unawaited, into the file's next test, moving its fake time and calling its objects.
 */
function withinBudget<T>(property: fc.IAsyncProperty<T>, budgetMs: number): fc.IAsyncProperty<T> {
  const endsAt = Date.now() + budgetMs;
  return {
    isAsync: () => true,
    generate: (random, runId) => property.generate(random, runId),
    shrink: (value) => property.shrink(value),
    run: (value) =>
      Date.now() >= endsAt
        ? Promise.resolve(new fc.PreconditionFailure(true))
        : property.run(value),
    runBeforeEach: () => property.runBeforeEach(),
    runAfterEach: () => property.runAfterEach(),
  };
}

/**
 * Runs `property` as `run` says, within `budgetMs` unless the run is long; fails the test with
 * the counterexample (`show` words it) and the command that replays it (`replayCommand`).
 */
export async function checkModelOrFail<T>(
  property: fc.IAsyncProperty<T>,
  run: ModelRun,
  options: {
    budgetMs: number;
    replayCommand: (seed: number, path: string) => string;
    show: (counterexample: T | null) => string;
  },
): Promise<void> {
  const { runs, seed, path, long } = run;
  const details = await fc.check(long ? property : withinBudget(property, options.budgetMs), {
    numRuns: runs,
    seed,
    ...(path ? { path, endOnFailure: true } : {}),
  });
  if (details.failed)
    expect.fail(
      `model counterexample: ${options.replayCommand(details.seed, details.counterexamplePath ?? "")}\n` +
        `${options.show(details.counterexample)}\n${String(details.errorInstance)}`,
    );
  expect(details.numRuns, "runs completed").toBeGreaterThan(0);
}
