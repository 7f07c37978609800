// Changes to a key's record as a model: fast-check command lists of requests with the key's
// secrets, time, and admin changes (a roll with or without grace, the expiry moved earlier, later
// or cleared, disabled, enabled, revoked; made here or in another isolate) against the real
// Worker, with D1 as the truth. See test/model/key-model.ts for the invariants. CI runs a fixed
// budget; `npm run test:model -- --runs N --seed S [--path P --replay R]` runs longer or replays
// (it runs this file too).
import fc from "fast-check";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { backgroundWork } from "./background-work";
import { mockClock, T0 } from "./helpers";
import {
  KeyAdvance,
  KeyChange,
  KeyEvict,
  type KeyModel,
  KeyRequest,
  keyCommands,
  keyModelSetup,
} from "./model/key-model";
import { checkModelOrFail, modelRunOf } from "./model/model-run";

/** CI's budget: this many runs from this seed, and never more than this long. */
const CI_RUNS = 25;
const CI_SEED = 26;
const MODEL_BUDGET_MS = 7_000;

const time = mockClock(T0);
const work = backgroundWork(time);

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});

const parameters = () => modelRunOf({ runs: CI_RUNS, seed: CI_SEED });

describe("changes to a key's record as a model (fast-check commands against the real Worker)", () => {
  it("serves no secret past a change's bound, and refuses none past it", {
    timeout: 600_000,
  }, async () => {
    const run = parameters();
    const { replayPath } = run;
    const setup = keyModelSetup(time, T0 + 5_000, work);
    const property = fc.asyncProperty(
      fc.commands(keyCommands(), {
        maxCommands: 30,
        size: "max",
        ...(replayPath ? { replayPath } : {}),
      }),
      async (cmds) => {
        await fc.asyncModelRun(setup, cmds);
      },
    );
    await checkModelOrFail(property, run, {
      budgetMs: MODEL_BUDGET_MS,
      replayCommand: (seed, path) =>
        `npm run test:model -- --seed ${seed} --path ${path} --replay <the replayPath below> --file test/quota.model-keys.test.ts`,
      show: (c) => String(c?.[0]),
    });
  });

  // A key calling every 40 s in AMS (its holder holds standing permits and keeps its copy of the
  // key with them), its objects evicted, then disabled with the push to the holders lost: 31 s
  // later the holder's kept copy decides one request, and is read again at once; every request
  // after it (a minute later, with a standing permit of that minute still held, and two at once)
  // is refused.
  it("decides at most one request per location on a copy older than 30 s where a push was lost", {
    timeout: 60_000,
  }, async () => {
    const setup = keyModelSetup(time, T0 + 5_000, work);
    let model: KeyModel | null = null;
    await fc.asyncModelRun(async () => {
      const world = await setup();
      model = world.model;
      return world;
    }, [
      new KeyAdvance(40_000).withSparseRequestIn(0),
      new KeyAdvance(40_000).withSparseRequestIn(0),
      new KeyAdvance(40_000).withSparseRequestIn(0),
      new KeyEvict(),
      new KeyChange("disable", true, 1_000, true),
      new KeyAdvance(31_000).withRequestsIn(0),
      new KeyAdvance(60_000).withRequestsIn(0),
      new KeyRequest(0, 2),
    ]);
    const { violations, servedOnOldCopy } = model! as KeyModel;
    expect(violations).toEqual([]);
    // The kept copy did decide one (the path the bound is about was taken).
    expect([...servedOnOldCopy.values()]).toEqual([1]);
  });
});
