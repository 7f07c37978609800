#!/usr/bin/env node
// @ts-check
// Runs the quota model (test/quota.model.test.ts) longer than CI's fixed budget, or replays a
// counterexample it printed:
//   npm run test:model -- --runs 500            500 runs from CI's seed
//   npm run test:model -- --runs 500 --seed 7   from another seed
//   npm run test:model -- --seed 26 --path 15:3:1:2:2 --replay MEF:F
//                                               replays one failure: the seed and path it printed,
//                                               and the replayPath its command list ends with
// The parameters reach the test, inside workerd, as bindings (vitest.config.ts MODEL_*).
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    runs: { type: "string" },
    seed: { type: "string" },
    path: { type: "string" },
    replay: { type: "string" },
  },
});
for (const [name, value] of Object.entries(values)) {
  const pattern = { path: /^\d+(:\d+)*$/, replay: /^[A-Za-z0-9+/=:]+$/ }[name] ?? /^-?\d+$/;
  if (value !== undefined && !pattern.test(value)) {
    console.error(
      `✗ --${name} ${value}: not a ${name === "path" || name === "replay" ? "path fast-check printed" : "whole number"}`,
    );
    process.exit(2);
  }
}
const result = spawnSync("npx", ["vitest", "run", "test/quota.model.test.ts"], {
  stdio: "inherit",
  env: {
    ...process.env,
    MODEL_RUNS: values.runs ?? (values.path ? "1000" : "200"),
    MODEL_SEED: values.seed ?? "",
    MODEL_PATH: values.path ?? "",
    MODEL_REPLAY: values.replay ?? "",
  },
});
process.exit(result.status ?? 1);
