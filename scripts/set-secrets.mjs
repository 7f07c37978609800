#!/usr/bin/env node
// @ts-check
// `npm run set-secrets -- staging|production [--yes]`, a JSON object on standard input
// ({"NAME": "value", …}; null deletes NAME): sets the Worker's secrets the way a gradual
// deployment allows, in a new version deployed like a release (docs/operations.md, "Rotating
// secrets without downtime").
//
// `wrangler secret put` would deploy the latest version with the secret to all traffic at once
// (and refuses during a gradual deployment). Instead: `wrangler versions secret bulk` makes one
// new version (the newest version's code and settings, these secrets changed), tagged with the
// newest version's git revision (the deploy and rollback checks read a version's tag and refuse
// one without), then `wrangler versions deploy` puts it at 100 %. Refused before any change when
// two versions serve (a gradual deployment: finish it first), or when the newest version is not
// the one serving (the new version would carry code that does not serve, say a failed deploy's
// canary). Secret values never reach the command line or the output.
import { readFileSync } from "node:fs";
import { environmentArgsOrThrow } from "./lib/environment-args.mjs";
import { loginProblem, wrangler } from "./lib/wrangler-remote.mjs";

const USAGE = `Usage: <JSON object> | npm run set-secrets -- staging|production [--yes]
Sets the Worker's secrets in one new version and deploys it to 100 % (wrangler versions secret
bulk, then versions deploy): the secrets and values come as a JSON object on standard input,
{"NAME": "value", ...}; null deletes NAME. Refused while two versions serve, or when the newest
version is not the one serving.
  --yes       go ahead (without it: show what would change, and change nothing)
  --help, -h  this text
Example (a rotation that keeps the old value valid, docs/operations.md):
  printf '{"CURSOR_SECRET_PREVIOUS":"%s","CURSOR_SECRET":"%s"}' "$OLD" "$(openssl rand -base64 32)" |
    npm run set-secrets -- production --yes
Exit codes: 0 set and deployed, 1 refused or failed (with the reason), 2 bad arguments or input.`;

/** @param {string} message @returns {never} */
function usageError(message) {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
}

/** @returns {{ env: string, yes: boolean }} */
function argumentsOrExit() {
  try {
    const { env, values } = environmentArgsOrThrow(USAGE, {
      yes: { type: "boolean", default: false },
    });
    return { env, yes: values.yes };
  } catch (err) {
    return usageError(err instanceof Error ? err.message : String(err));
  }
}

const { env, yes } = argumentsOrExit();

/**
 * The secrets from standard input: an object of names (as the Worker reads them) to a value or
 * null. A problem is named without echoing any value.
 * @returns {Record<string, string | null>}
 */
function secretsOrExit() {
  if (process.stdin.isTTY)
    usageError('Pipe the secrets in as a JSON object: {"NAME": "value", ...}.');
  /** @type {unknown} */
  let parsed;
  try {
    parsed = JSON.parse(readFileSync(0, "utf8"));
  } catch {
    usageError('Standard input is not JSON: {"NAME": "value", ...} (null deletes NAME).');
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    usageError('Standard input is not a JSON object: {"NAME": "value", ...}.');
  const entries = Object.entries(parsed);
  if (entries.length === 0) usageError("Standard input names no secret.");
  for (const [name, value] of entries) {
    if (!/^[A-Z][A-Z0-9_]*$/.test(name))
      usageError(`${name}: a secret's name is upper case, digits and _ (CURSOR_SECRET).`);
    if (value !== null && (typeof value !== "string" || value.trim() === ""))
      usageError(`${name}: the value is not a non-empty string (null deletes the secret).`);
  }
  return /** @type {Record<string, string | null>} */ (parsed);
}

const secrets = secretsOrExit();
const names = Object.keys(secrets);
const deleted = names.filter((n) => secrets[n] === null);
const set = names.filter((n) => secrets[n] !== null);

/** @param {string} message @returns {never} */
function refuse(message) {
  console.error(`✗ Secrets of ${env} not changed: ${message}`);
  process.exit(1);
}
/**
 * The JSON wrangler printed, or a refusal naming `what` could not be read.
 * @param {{ ok: boolean, output: string }} run @param {string} what
 * @returns {any}
 */
function jsonOrRefuse(run, what) {
  try {
    if (run.ok) return JSON.parse(run.output);
  } catch {
    // Refused below.
  }
  return refuse(`could not read ${what}:\n${run.output}`);
}

const login = loginProblem(env);
if (login) refuse(login);

/** @type {{ versions?: Array<{ version_id: string, percentage: number }> }} */
const deployment = jsonOrRefuse(
  wrangler(env, ["deployments", "status", "--json"]),
  "the current deployment",
);
const serving = deployment.versions ?? [];
if (serving.length !== 1)
  refuse(
    `${serving.length} versions serve (${serving.map((v) => `${v.version_id} ${v.percentage} %`).join(", ") || "none"}). ` +
      "Finish that deployment first (promote it or npm run rollback), so the new version is one that serves all traffic with the secrets changed.",
  );
const servingId = serving[0].version_id;

/** @type {Array<{ id: string, annotations?: Record<string, string> }>} */
const versions = jsonOrRefuse(wrangler(env, ["versions", "list", "--json"]), "the versions");
const newest = versions.at(-1);
if (!newest || newest.id !== servingId)
  refuse(
    `the newest version ${newest?.id ?? "(none)"} is not the one serving (${servingId}), and the new version would copy the newest: ` +
      "its code would serve with the secrets. Deploy a release first (npm run deploy:" +
      `${env}), so the newest version is the one serving, then set the secrets.`,
  );
const tag = newest.annotations?.["workers/tag"];
if (!tag)
  refuse(
    `version ${servingId} has no git revision tag, so neither would the new one, and the deploy and rollback checks refuse such a version. Deploy a release first (npm run deploy:${env}).`,
  );

console.log(
  `${env}: ${servingId} (${tag}) serves all traffic.\n` +
    `A new version of it with ${[
      set.length ? `${set.join(", ")} set` : "",
      deleted.length ? `${deleted.join(", ")} deleted` : "",
    ]
      .filter(Boolean)
      .join(" and ")}, then deployed to 100 %.`,
);
if (!yes) refuse("not confirmed: pass --yes to go ahead.");

const message =
  `secrets: ${[...set.map((n) => `set ${n}`), ...deleted.map((n) => `delete ${n}`)].join(", ")}`.slice(
    0,
    100,
  );
const bulk = wrangler(env, ["versions", "secret", "bulk", "--tag", tag, "--message", message], {
  input: JSON.stringify(secrets),
});
const newVersion = /Created version ([0-9a-f-]{36})/i.exec(bulk.output)?.[1];
if (!bulk.ok || !newVersion)
  refuse(
    `wrangler versions secret bulk failed (exit ${bulk.ok ? "0, no version id reported" : bulk.status}); nothing was deployed:\n${bulk.output}`,
  );
console.log(`✓ version ${newVersion}: ${servingId} with the secrets changed`);

const deploy = wrangler(
  env,
  ["versions", "deploy", `${newVersion}@100`, "--yes", "--message", message],
  {
    inherit: true,
  },
);
if (!deploy.ok)
  refuse(
    `wrangler versions deploy failed (exit ${deploy.status}): ${servingId} should still serve, with the old values. ` +
      `Deploy the new version by hand:\n  npm run wrangler -- versions deploy ${newVersion}@100 --env ${env}`,
  );
console.log(
  `✓ ${env}: ${newVersion} serves all traffic, with the secrets changed.\n` +
    `  npm run rollback -- ${env} goes back to ${servingId}, with the old values.`,
);
