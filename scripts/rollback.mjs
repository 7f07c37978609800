#!/usr/bin/env node
// @ts-check
// `npm run rollback -- staging|production [--to VERSION_ID] [--yes]`: puts back, at 100 % of
// traffic, the version that served before the latest deployment (wrangler's choice), or the one
// named with --to. Shows what serves now and asks first (--yes: does not ask). D1 is not touched:
// a migration already applied stays applied (docs/operations.md, "Rollback").
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { loginProblem, wrangler } from "./lib/wrangler-remote.mjs";

const USAGE = "Usage: npm run rollback -- staging|production [--to VERSION_ID] [--yes]";

/** @returns {{ env: string, to: string | undefined, yes: boolean }} */
function argumentsOrExit() {
  try {
    const { values, positionals } = parseArgs({
      allowPositionals: true,
      options: { to: { type: "string" }, yes: { type: "boolean", default: false } },
    });
    const [env, ...rest] = positionals;
    if ((env !== "staging" && env !== "production") || rest.length)
      throw new Error("name one environment: staging or production");
    if (values.to !== undefined && !/^[0-9a-f-]{36}$/i.test(values.to))
      throw new Error(`--to ${values.to} is not a version id (a UUID; see wrangler versions list)`);
    return { env, to: values.to, yes: values.yes };
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    process.exit(2);
  }
}

const { env, to, yes } = argumentsOrExit();

/** @param {string} message @returns {never} */
function refuse(message) {
  console.error(`✗ Not rolling back ${env}: ${message}`);
  process.exit(1);
}

const login = loginProblem(env);
if (login) refuse(login);

const before = wrangler(env, ["deployments", "status"]);
if (!before.ok) refuse(`could not read the current deployment:\n${before.output}`);
console.log(`Serving ${env} now:\n${before.output.trimEnd()}\n`);

const target = to ?? "the version deployed before the current one";
if (!yes) {
  if (!process.stdin.isTTY) refuse("not asked (no terminal): pass --yes.");
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  const answer = await prompt.question(`Roll ${env} back to ${target}? [y/N] `);
  prompt.close();
  if (!/^y(es)?$/i.test(answer.trim())) refuse("not confirmed.");
}

const rollback = wrangler(
  env,
  ["rollback", ...(to ? [to] : []), "--yes", "--message", `manual rollback to ${target}`],
  { inherit: true },
);
if (!rollback.ok) refuse(`wrangler rollback failed (exit ${rollback.status}).`);

const after = wrangler(env, ["deployments", "status"]);
console.log(`\n✓ rolled back. Serving ${env} now:\n${after.output.trimEnd()}`);
