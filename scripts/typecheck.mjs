#!/usr/bin/env node
// @ts-check
// `npm run typecheck`: the five TypeScript projects (the Worker and its tests, the bench Workers,
// the Node scripts, the browser e2e tests, the client package), checked side by side, as many at
// once as the machine has cores, each incremental (its build info under node_modules/.cache/tsc,
// so a second run rechecks only what changed). Each project's output is printed whole, in order;
// the exit code is 1 when any project fails.
import { spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TSC = path.join(ROOT, "node_modules", "typescript", "bin", "tsc");
const CACHE = path.join(ROOT, "node_modules", ".cache", "tsc");

/** @type {[config: string, name: string][]} Each project: its tsconfig, and a name for its build info. */
const PROJECTS = [
  ["tsconfig.json", "worker"],
  ["tsconfig.bench.json", "bench"],
  ["tsconfig.scripts.json", "scripts"],
  ["tsconfig.e2e-browser.json", "e2e-browser"],
  ["packages/client/tsconfig.json", "client"],
];

/**
 * Runs tsc on one project; resolves with its exit code and everything it printed.
 * @param {[string, string]} project
 * @returns {Promise<{ config: string, code: number, out: string }>}
 */
function check([config, name]) {
  return new Promise((resolve) => {
    const args = [TSC, "--noEmit", "-p", config, "--incremental"];
    args.push("--tsBuildInfoFile", path.join(CACHE, `${name}.tsbuildinfo`));
    const child = spawn(process.execPath, args, { cwd: ROOT });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("close", (code) => resolve({ config, code: code ?? 1, out }));
  });
}

/** @type {{ config: string, code: number, out: string }[]} */
const results = [];
let next = 0;
async function worker() {
  while (next < PROJECTS.length) {
    const i = next++;
    results[i] = await check(PROJECTS[i]);
  }
}
const lanes = Math.max(1, Math.min(availableParallelism(), PROJECTS.length));
await Promise.all(Array.from({ length: lanes }, worker));

let failed = 0;
for (const { config, code, out } of results) {
  if (code === 0) continue;
  failed++;
  console.error(`✗ tsc -p ${config} (exit ${code})\n${out}`);
}
if (failed) process.exit(1);
console.log(`✓ typecheck: ${PROJECTS.length} projects`);
