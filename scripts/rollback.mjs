#!/usr/bin/env node
// @ts-check
// `npm run rollback -- staging|production [--to VERSION_ID] [--yes]`: puts back, at 100 %
// of traffic, the version that served before the latest deployment, or the one named with --to.
// Shows what serves now and asks first (--yes: does not ask). D1 is not touched: a migration
// already applied stays applied (docs/operations.md, "Rolling back"). First it checks that the
// target can read what the versions serving now have written (compat/release.json of each
// version's git revision), and refuses when it cannot.
import { createInterface } from "node:readline/promises";
import { rollbackTargetProblem } from "./lib/compat.mjs";
import { deployedBeforeOf } from "./lib/deploy-checks.mjs";
import { environmentArgsOrThrow } from "./lib/environment-args.mjs";
import { loginProblem, wrangler } from "./lib/wrangler-remote.mjs";

const USAGE = `Usage: npm run rollback -- staging|production [--to VERSION_ID] [--yes]
Puts back, at 100 % of traffic, the version deployed before the current one (or VERSION_ID),
after checking that it reads what the versions serving now have written. D1 is not touched.
  --to VERSION_ID  the version to put back (a UUID: npm run wrangler -- versions list --env ENV)
  --yes            do not ask for confirmation (needed without a terminal)
  --help, -h       this text
Exit codes: 0 rolled back, 1 refused or failed (with the reason), 2 bad arguments.`;

/** @returns {{ env: string, to: string | undefined, yes: boolean }} */
function argumentsOrExit() {
  try {
    const { env, values } = environmentArgsOrThrow(USAGE, {
      to: { type: "string" },
      yes: { type: "boolean", default: false },
    });
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

/** @param {string[]} args what to ask wrangler, as JSON */
function jsonOrRefuse(args) {
  const r = wrangler(env, [...args, "--json"]);
  try {
    if (r.ok) return JSON.parse(r.output);
  } catch {
    // refused below, with what wrangler said
  }
  refuse(`could not read ${args.join(" ")}:\n${r.output}`);
}
const serving = /** @type {{ versions?: Array<{ version_id: string }> }} */ (
  jsonOrRefuse(["deployments", "status"])
);
const targetId =
  to ??
  deployedBeforeOf(jsonOrRefuse(["deployments", "list"])) ??
  refuse("there is no deployment before the current one to roll back to.");
const problem = rollbackTargetProblem({
  servingVersions: (serving.versions ?? []).map((v) => v.version_id),
  targetVersion: targetId,
  versionView: (id) => jsonOrRefuse(["versions", "view", id]),
});
if (problem) refuse(problem);
console.log(`✓ ${targetId} reads what the versions serving now have written (compat/release.json)`);

const target = to ?? `${targetId}, the version deployed before the current one`;
if (!yes) {
  if (!process.stdin.isTTY) refuse("not asked (no terminal): pass --yes.");
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  const answer = await prompt.question(`Roll ${env} back to ${target}? [y/N] `);
  prompt.close();
  if (!/^y(es)?$/i.test(answer.trim())) refuse("not confirmed.");
}

const rollback = wrangler(
  env,
  ["rollback", targetId, "--yes", "--message", `manual rollback to ${target}`.slice(0, 100)],
  { inherit: true },
);
if (!rollback.ok) refuse(`wrangler rollback failed (exit ${rollback.status}).`);

const after = wrangler(env, ["deployments", "status"]);
console.log(`\n✓ rolled back. Serving ${env} now:\n${after.output.trimEnd()}`);
