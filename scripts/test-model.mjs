#!/usr/bin/env node
// @ts-check
// Runs the quota models (test/quota.model*.test.ts) longer than CI's fixed budget, or replays a
// counterexample one printed:
//   npm run test:model -- --runs 500            500 runs from CI's seed
//   npm run test:model -- --runs 500 --seed 7   from another seed
//   npm run test:model -- --seed 26 --path 15:3:1:2:2 --replay MEF:F --file test/quota.model.test.ts
//                                               replays one failure: the seed and path it printed,
//                                               the replayPath its command list ends with, and the
//                                               file that printed it (without --file: every model file)
// The parameters reach the test, inside workerd, as bindings (vitest.config.ts MODEL_*).
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    runs: { type: "string" },
    seed: { type: "string" },
    path: { type: "string" },
    replay: { type: "string" },
    file: { type: "string" },
  },
});
for (const [name, value] of Object.entries(values)) {
  const pattern =
    {
      path: /^\d+(:\d+)*$/,
      replay: /^[A-Za-z0-9+/=:]+$/,
      file: /^test\/quota\.model[\w.-]*\.test\.ts$/,
    }[name] ?? /^-?\d+$/;
  if (value !== undefined && !pattern.test(value)) {
    console.error(
      `✗ --${name} ${value}: not a ${name === "file" ? "model test file (test/quota.model*.test.ts)" : name === "path" || name === "replay" ? "path fast-check printed" : "whole number"}`,
    );
    process.exit(2);
  }
}
/** The model's test files (each reads the parameters; a counterexample replays in the file that printed it). */
const MODEL_FILES = [
  "test/quota.model.test.ts",
  "test/quota.model-keys.test.ts",
  "test/quota.model-scheduled.test.ts",
];
const result = spawnSync("npx", ["vitest", "run", ...(values.file ? [values.file] : MODEL_FILES)], {
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
