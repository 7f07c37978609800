#!/usr/bin/env node
// @ts-check
// Runs the end-to-end tests (`e2e/*.test.mjs`, or the files named as arguments) one file at a
// time with node's test runner and the spec reporter, and exits non-zero if any test or suite
// failed. `node --test` alone is not enough: a suite whose body throws while it is being built
// (say `before is not defined` inside a `describe`) is reported as failed but counted in neither
// `fail` nor the exit code, so the run exited 0. Here every failure event counts, whatever it
// belongs to (a test, a suite, a file that did not load); a failing `todo` test does not, as in
// node's own count.
import { readdirSync } from "node:fs";
import path from "node:path";
import { run } from "node:test";
import { spec } from "node:test/reporters";

const E2E_DIR = "e2e";

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

/** @type {string[]} */
const failed = [];
const tests = run({ files, concurrency: 1 });
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
