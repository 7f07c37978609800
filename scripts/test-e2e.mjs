#!/usr/bin/env node
// @ts-check
// Runs the end-to-end tests (`e2e/*.test.mjs`, or the files named as arguments) with node's test
// runner and the spec reporter, FILES_AT_ONCE files at a time (each in its own process, with its
// own servers on free ports), and exits non-zero if any test or suite failed. The local D1
// migrations are applied once, before the files run: each API a file starts begins from a copy of
// that store (MIGRATED_STATE_ENV in scripts/lib/local-server.mjs).
// `node --test` alone is not enough: a suite whose body throws while it is being built (say
// `before is not defined` inside a `describe`) is reported as failed but counted in neither
// `fail` nor the exit code, so the run exited 0. Here every failure event counts, whatever it
// belongs to (a test, a suite, a file that did not load); a failing `todo` test does not, as in
// node's own count.
import { readdirSync } from "node:fs";
import path from "node:path";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import { MIGRATED_STATE_ENV, makeMigratedState } from "./lib/local-server.mjs";

const E2E_DIR = "e2e";
/**
 * Files run at once. Much of an e2e file's time is spent waiting (for a minute window to turn,
 * a webhook retry, a bake, a browser), so two files share the CPU well even on two cores.
 */
const FILES_AT_ONCE = 2;

const files =
  process.argv.length > 2
    ? process.argv.slice(2)
    : readdirSync(E2E_DIR)
        .filter((name) => name.endsWith(".test.mjs"))
        .sort()
        .map((name) => path.join(E2E_DIR, name));
if (files.length === 0) {
  console.error(`✗ no test files in ${E2E_DIR}/`);
  process.exit(1);
}

process.env[MIGRATED_STATE_ENV] = await makeMigratedState();

/** @type {string[]} */
const failed = [];
const tests = run({ files, concurrency: FILES_AT_ONCE });
tests.on("test:fail", (event) => {
  if (event.todo !== undefined && event.todo !== false) return;
  const where = event.file ? ` (${path.relative(process.cwd(), event.file)})` : "";
  failed.push(`${event.details.type ?? "test"} "${event.name}"${where}`);
  process.exitCode = 1;
});
const report = tests.compose(spec);
report.on("end", () => {
  if (failed.length === 0) return;
  console.error(`\n✗ e2e: ${failed.length} failed (tests, suites and files):`);
  for (const failure of failed) console.error(`  ${failure}`);
});
report.pipe(process.stdout);
