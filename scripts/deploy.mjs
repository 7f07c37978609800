#!/usr/bin/env node
// @ts-check
// `npm run deploy:staging` / `deploy:production` [-- --yes] [--force] [--skip-tests]
//   [--percentage N] [--bake DURATION] [--smoke-every DURATION] | [--all-at-once]
//
// 1. Preflight, before anything remote changes; each problem stops the deploy with what to do:
//    real D1 ids and PUBLIC_ORIGIN, an address (production: a route or custom domain serving
//    PUBLIC_ORIGIN), a compatibility date the pinned runtime knows, a clean working tree and
//    green tests (`--force` skips these two, and says so; `--skip-tests` the tests alone, for CI,
//    whose test job already ran them on this commit), wrangler logged in, the Worker's
//    secrets set, the environment's admin token in $ADMIN_TOKEN for the smoke test, and in
//    production D1 read replication on.
// 2. Remote D1 migrations: the pending ones are listed, applied after a yes (or --yes), and a
//    failure stops the deploy before any code changes.
// 3. Gradual rollout: the new version is uploaded, deployed to N % (default 10) beside the version
//    serving now, smoke-tested (requests pinned to it), left to bake (--bake, default
//    DEFAULT_BAKE_MS of the environment; smoke-tested every --smoke-every and at the end),
//    promoted to 100 % and smoke-tested again. A failed smoke test or promotion, or an interrupt during the bake, rolls
//    back to the version that served before. The first
//    deploy of an environment (nothing to roll back to), and one with --all-at-once (a release
//    with a Durable Object migration, which a version upload cannot carry), is a plain
//    `wrangler deploy` followed by the smoke test (and the same rollback when it fails).
//    The rollback is checked in the preflight: the version serving now must read what this
//    release writes (compat/release.json); if not, the deploy stops there (--force deploys
//    anyway, and then a failure does not roll back: quotas and keys stay working).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline/promises";
import { rollbackTargetProblem } from "./lib/compat.mjs";
import {
  addressProblem,
  bakeSmokeTimesOf,
  compatibilityDateProblem,
  DEFAULT_BAKE_MS,
  DEFAULT_SMOKE_EVERY_MS,
  durationMsOf,
  formatDuration,
  isPlaceholderId,
  isPlaceholderOrigin,
  isRolloutPercentage,
  missingSecrets,
  pendingMigrationsOf,
  stableVersionOf,
} from "./lib/deploy-checks.mjs";
import { environmentArgsOrThrow } from "./lib/environment-args.mjs";
import { runSmokeOrThrow, SmokeFailure } from "./lib/smoke.mjs";
import { loginProblem, wrangler } from "./lib/wrangler-remote.mjs";

const USAGE = `Usage: npm run deploy:staging|deploy:production -- [--yes] [--force] [--skip-tests]
         [--percentage 1-99] [--bake DURATION] [--smoke-every DURATION] | [--all-at-once]
   or: node scripts/deploy.mjs staging|production [options]
Preflight checks, remote D1 migrations, then a gradual rollout: the new version at N % beside the
one serving now, smoke-tested, left to bake while the smoke test runs again and again, then 100 %
and smoke-tested again; a failure rolls back (docs/operations.md, "Rolling back").
  --yes                  apply pending migrations without asking (needed without a terminal)
  --force                deploy with uncommitted changes, without running the tests, and without
                         an automatic rollback when the version serving now could not read this
                         release
  --skip-tests           do not run npm test (they passed on this commit already: CI's test job)
  --percentage N         the canary's share of traffic, 1-99 (default 10)
  --bake DURATION        how long the canary serves before 100 %: "90s", "5m", or 0 for none
                         (default ${formatDuration(DEFAULT_BAKE_MS.production)} in production, ${formatDuration(DEFAULT_BAKE_MS.staging)} in staging)
  --smoke-every DURATION how often the smoke test runs during the bake (default ${formatDuration(DEFAULT_SMOKE_EVERY_MS)}),
                         and once more at its end
  --all-at-once          one \`wrangler deploy\` to all traffic, no canary and no bake (a release
                         with a Durable Object migration)
  --help, -h             this text
Needs ADMIN_TOKEN (the environment's admin token) for the smoke test.
Exit codes: 0 deployed, 1 refused or failed (rolled back where it could), 2 bad arguments.`;

/**
 * @returns {{ env: "staging" | "production", yes: boolean, force: boolean, skipTests: boolean,
 *   percentage: number, bakeMs: number, smokeEveryMs: number, allAtOnce: boolean }}
 */
function argumentsOrExit() {
  try {
    const { env, values } = environmentArgsOrThrow(USAGE, {
      yes: { type: "boolean", default: false },
      force: { type: "boolean", default: false },
      "skip-tests": { type: "boolean", default: false },
      percentage: { type: "string" },
      bake: { type: "string" },
      "smoke-every": { type: "string" },
      "all-at-once": { type: "boolean", default: false },
    });
    for (const canaryOnly of ["percentage", "bake", "smoke-every"])
      if (
        values[/** @type {"percentage" | "bake" | "smoke-every"} */ (canaryOnly)] !== undefined &&
        values["all-at-once"]
      )
        throw new Error(`--${canaryOnly} and --all-at-once exclude each other`);
    const percentage = values.percentage ?? "10";
    if (!isRolloutPercentage(percentage))
      throw new Error(`--percentage ${percentage}: an integer from 1 to 99`);
    const bakeMs = values.bake === undefined ? DEFAULT_BAKE_MS[env] : durationMsOf(values.bake);
    if (bakeMs === null)
      throw new Error(`--bake ${values.bake}: whole seconds or minutes ("90s", "5m"), or 0`);
    const smokeEveryMs =
      values["smoke-every"] === undefined
        ? DEFAULT_SMOKE_EVERY_MS
        : durationMsOf(values["smoke-every"]);
    if (!smokeEveryMs)
      throw new Error(
        `--smoke-every ${values["smoke-every"]}: whole seconds or minutes ("30s", "1m"), more than 0`,
      );
    return {
      env,
      yes: values.yes,
      force: values.force,
      skipTests: values["skip-tests"],
      percentage: Number(percentage),
      bakeMs,
      smokeEveryMs,
      allAtOnce: values["all-at-once"],
    };
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    process.exit(2);
  }
}

const { env, yes, force, skipTests, percentage, bakeMs, smokeEveryMs, allAtOnce } =
  argumentsOrExit();
// Loaded once the arguments are read: wrangler is a large module (seconds to load on a busy
// machine), and --help or a usage error needs none of it.
const { unstable_readConfig } = await import("wrangler");
// The deploy's smoke tests use a key of their own: `npm run smoke` by hand meanwhile (its key is
// smoke-test) cannot disable it mid-run and fail the bake.
const DEPLOY_SMOKE_KEY_NAME = "smoke-deploy";

/** @param {string} message @returns {never} */
function refuse(message) {
  console.error(`✗ Not deploying ${env}: ${message}`);
  process.exit(1);
}
/** @param {string} title */
const step = (title) => console.log(`\n== ${title}`);

// ------------------------------------------------------------------ 1. preflight
step(`Preflight (${env})`);
const config = unstable_readConfig({ config: "wrangler.toml", env });
for (const db of config.d1_databases ?? []) {
  if (isPlaceholderId(db.database_id))
    refuse(
      `[env.${env}] D1 binding ${db.binding} still has the placeholder database_id ${db.database_id}.\n` +
        `Create the database and put its id into wrangler.toml:\n  npm run wrangler -- d1 create ${db.database_name}`,
    );
}
const publicOrigin = config.vars?.PUBLIC_ORIGIN;
if (typeof publicOrigin !== "string" || isPlaceholderOrigin(publicOrigin))
  refuse(
    `[env.${env}.vars] PUBLIC_ORIGIN is ${publicOrigin ? `the placeholder ${publicOrigin}` : "empty"}: ` +
      "set it to the origin this environment is served from (its links and OpenAPI servers name it).",
  );
const address = addressProblem(env, config, publicOrigin);
if (address) refuse(address);
const runtimeDate = createRequire(import.meta.url)("workerd").compatibilityDate;
const compatibility = compatibilityDateProblem(
  config.compatibility_date,
  runtimeDate,
  new Date().toISOString().slice(0, 10),
);
if (compatibility) refuse(compatibility);
console.log(
  `✓ configuration: D1 ids, ${publicOrigin}, compatibility date ${config.compatibility_date}`,
);

const git = spawnSync("git", ["status", "--porcelain"], { encoding: "utf8" });
const gitProblem =
  git.status !== 0
    ? "this is not a git checkout, so what is deployed could not be told apart from what is committed."
    : git.stdout.trim()
      ? `the working tree has uncommitted changes:\n${git.stdout.trimEnd()}`
      : null;
if (gitProblem && !force) refuse(`${gitProblem}\nCommit them, or pass --force.`);
if (gitProblem) console.log(`! --force: deploying anyway; ${gitProblem.split("\n")[0]}`);
else console.log("✓ working tree clean");

if (force) console.log("! --force: the tests were not run");
else if (skipTests)
  console.log("! --skip-tests: the tests were not run here (they passed on this commit before)");
else {
  console.log("… npm test");
  const tests = spawnSync("npm", ["test"], { encoding: "utf8" });
  if (tests.status !== 0)
    refuse(
      `the tests fail (npm test):\n${`${tests.stdout}${tests.stderr}`.split("\n").slice(-40).join("\n")}`,
    );
  console.log("✓ tests green (npm test)");
}

const login = loginProblem(env);
if (login) refuse(login);
console.log("✓ wrangler logged in");

const secretList = wrangler(env, ["secret", "list", "--format", "json"]);
/** @type {string[]} */
let secretNames = [];
let workerExists = true;
try {
  secretNames = JSON.parse(secretList.output).map((/** @type {{name: string}} */ s) => s.name);
} catch {
  // The Worker may not exist yet (first deploy): then no secret is set either.
  if (!/not found|does not exist|10007/i.test(secretList.output))
    refuse(`could not list the Worker's secrets:\n${secretList.output}`);
  workerExists = false;
}
const missing = missingSecrets(secretNames);
// `secret put` creates a Worker that does not exist yet, but on one that does it deploys the
// latest version with the secret to all traffic at once (and refuses during a gradual
// deployment); `versions secret put` only makes a new version with it, which this deploy's upload
// then inherits.
const putSecret = workerExists ? "versions secret put" : "secret put";
if (missing.length)
  refuse(
    `missing secret(s) ${missing.join(", ")}. Generate, keep and set each (docs/operations.md, "${workerExists ? "Rotating secrets" : "First deploy"}"):\n` +
      missing
        .map(
          (n) =>
            `  ${n}=$(openssl rand -base64 32); echo "$${n}"; echo "$${n}" | npm run wrangler -- ${putSecret} ${n} --env ${env}`,
        )
        .join("\n") +
      (workerExists
        ? "\nEach makes a new version with the secret, not deployed; this deploy's upload carries it."
        : ""),
  );
console.log(`✓ secrets set (${secretNames.join(", ")})`);

const adminToken = process.env.ADMIN_TOKEN;
if (!adminToken)
  refuse(
    `set ADMIN_TOKEN to ${env}'s admin token (one of its ADMIN_TOKEN or ADMIN_TOKENS secrets, with full access): ` +
      `the smoke test enables its key (${DEPLOY_SMOKE_KEY_NAME}) with it, and disables it after each run.`,
  );

if (env === "production") {
  for (const db of config.d1_databases ?? []) {
    const info = wrangler(env, ["d1", "info", db.database_name ?? db.binding, "--json"]);
    /** @type {{ read_replication?: { mode?: string } } | null} */
    let details = null;
    try {
      details = JSON.parse(info.output);
    } catch {
      refuse(`could not read D1 database ${db.database_name}'s settings:\n${info.output}`);
    }
    const mode = details?.read_replication?.mode;
    if (mode === "disabled")
      refuse(
        `D1 read replication is off on ${db.database_name}: reads from far away go to the primary. ` +
          'Turn it on (docs/operations.md, "First deploy"), then deploy again.',
      );
    console.log(`✓ D1 ${db.database_name}: read replication ${mode ?? "(not reported)"}`);
  }
}

const status = wrangler(env, ["deployments", "status", "--json"]);
/** @type {string | null} */
let previousVersion = null;
if (status.ok) {
  try {
    previousVersion = stableVersionOf(JSON.parse(status.output));
  } catch {
    refuse(`could not read the current deployment:\n${status.output}`);
  }
} else if (!/no deployments|not found|does not exist|10007/i.test(status.output))
  refuse(`could not read the current deployment:\n${status.output}`);
console.log(
  previousVersion
    ? `✓ serving now: version ${previousVersion}`
    : "✓ first deploy of this environment (nothing serves yet)",
);

// A failed deploy rolls back to the version serving now: only if that version reads everything
// this release may write meanwhile (key formats, object schemas, D1, cursors), else the rollback
// would turn quotas off or refuse keys.
const headCommit = spawnSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" }).stdout?.trim();
const rollbackUnsafe =
  previousVersion &&
  rollbackTargetProblem({
    servingVersions: [previousVersion],
    targetVersion: previousVersion,
    versionView: (id) => {
      const view = wrangler(env, ["versions", "view", id, "--json"]);
      try {
        return view.ok ? JSON.parse(view.output) : null;
      } catch {
        return null;
      }
    },
    current: { commit: headCommit || "HEAD", checkout: process.cwd() },
  });
if (rollbackUnsafe && !force)
  refuse(
    `if this deploy failed, it could not roll back: ${rollbackUnsafe}\n` +
      "Deploy first a release that reads what this one writes (docs/architecture.md, " +
      '"Where a change goes"), or pass --force to deploy without an automatic rollback.',
  );
if (rollbackUnsafe)
  console.log(
    `! --force: a failed deploy will not roll back to ${previousVersion}: ${rollbackUnsafe.split("\n")[0]}`,
  );
else if (previousVersion)
  console.log(`✓ ${previousVersion} reads what this release writes: a rollback to it is safe`);

/** @param {string} question */
async function confirmedOrRefuse(question) {
  if (yes) return;
  if (!process.stdin.isTTY) refuse(`${question} Not asked (no terminal): pass --yes.`);
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  const answer = await prompt.question(`${question} [y/N] `);
  prompt.close();
  if (!/^y(es)?$/i.test(answer.trim())) refuse("not confirmed.");
}

// ------------------------------------------------------------------ 2. migrations
step("D1 migrations (remote)");
for (const db of config.d1_databases ?? []) {
  const list = wrangler(env, ["d1", "migrations", "list", db.binding, "--remote"]);
  if (!list.ok) refuse(`could not list ${db.binding}'s migrations:\n${list.output}`);
  console.log(list.output.trimEnd());
  const pending = pendingMigrationsOf(list.output);
  if (pending.length === 0) continue;
  await confirmedOrRefuse(
    `Apply ${pending.length} migration(s) to ${db.database_name} (${env}): ${pending.join(", ")}?`,
  );
  // CI=true: wrangler applies without asking again (asked above).
  const apply = wrangler(env, ["d1", "migrations", "apply", db.binding, "--remote"], {
    inherit: true,
    extraEnv: { CI: "true" },
  });
  if (!apply.ok)
    refuse(
      `the migrations of ${db.binding} failed (wrangler exited ${apply.status}). Nothing was deployed; ` +
        "D1 rolls back a failed migration file, the ones before it stay applied (see the list above).",
    );
  console.log(`✓ ${pending.length} migration(s) applied`);
}

// ------------------------------------------------------------------ 3. rollout
const gitRevision = spawnSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" });
const revision = gitRevision.status === 0 ? gitRevision.stdout.trim() : "uncommitted";
const message = `deploy ${revision}${gitProblem ? " (forced)" : ""}`;

/**
 * The smoke test against PUBLIC_ORIGIN; `pinnedVersion` sends every request to that version.
 * @param {string | null} pinnedVersion
 */
async function smokeFailure(pinnedVersion) {
  /** @type {Record<string, string>} */
  const headers = pinnedVersion
    ? { "Cloudflare-Workers-Version-Overrides": `${config.name}="${pinnedVersion}"` }
    : {};
  try {
    await runSmokeOrThrow({
      url: /** @type {string} */ (publicOrigin),
      adminToken: /** @type {string} */ (adminToken),
      headers,
      keyName: DEPLOY_SMOKE_KEY_NAME,
      log: (line) => console.log(`  ${line}`),
    });
    return null;
  } catch (err) {
    if (err instanceof SmokeFailure) return err.message;
    throw err;
  }
}

/** @param {string} why @returns {Promise<never>} */
async function rollBackAndExit(why) {
  console.error(`✗ ${why}`);
  if (rollbackUnsafe) {
    console.error(
      `✗ NOT ROLLED BACK: ${rollbackUnsafe}\nThe new version keeps serving; the deploy failed.`,
    );
    process.exit(1);
  }
  const byHand = `npm run rollback -- ${env} --to ${previousVersion}`;
  step(`Rollback to ${previousVersion}`);
  const back = wrangler(
    env,
    [
      "rollback",
      /** @type {string} */ (previousVersion),
      "--yes",
      "--message",
      `${message}: ${why}`.slice(0, 100),
    ],
    { inherit: true },
  );
  if (!back.ok) {
    console.error(
      `✗ THE ROLLBACK FAILED (wrangler exited ${back.status}). Roll back by hand:\n  ${byHand}`,
    );
    process.exit(1);
  }
  console.error(`✓ rolled back: ${previousVersion} serves all traffic again. The deploy failed.`);
  process.exit(1);
}

if (!previousVersion || allAtOnce) {
  step(
    previousVersion
      ? "Deploy to all traffic at once"
      : "Deploy (first version of this environment)",
  );
  const whole = wrangler(env, ["deploy", "--tag", revision, "--message", message], {
    inherit: true,
  });
  if (!whole.ok)
    refuse(
      `wrangler deploy failed (exit ${whole.status}).${previousVersion ? ` ${previousVersion} should still serve all traffic.` : ""}`,
    );
  step(`Smoke test ${publicOrigin}`);
  const failure = await smokeFailure(null);
  if (failure && previousVersion) await rollBackAndExit(`smoke test failed: ${failure}`);
  if (failure)
    refuse(
      `the smoke test failed (${failure}). There is no earlier version to roll back to: fix and deploy again.`,
    );
  console.log(`\n✓ ${env} deployed (${revision}) and smoke-tested.`);
  process.exit(0);
}

step("Upload the new version");
const outputDir = mkdtempSync(path.join(tmpdir(), "animal-store-deploy-"));
const outputFile = path.join(outputDir, "wrangler-output.ndjson");
const upload = wrangler(env, ["versions", "upload", "--tag", revision, "--message", message], {
  inherit: true,
  extraEnv: { WRANGLER_OUTPUT_FILE_PATH: outputFile },
});
/** @type {string | undefined} */
let newVersion;
try {
  newVersion = readFileSync(outputFile, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .find((entry) => entry.type === "version-upload")?.version_id;
} catch {
  newVersion = undefined;
} finally {
  rmSync(outputDir, { recursive: true, force: true });
}
if (!upload.ok || !newVersion)
  refuse(
    `the upload failed (wrangler exited ${upload.status}${upload.ok ? ", no version id reported" : ""}). ` +
      `Nothing was deployed: ${previousVersion} still serves all traffic. ` +
      "If wrangler named Durable Object migrations (a new class), deploy this release with --all-at-once.",
  );
console.log(`✓ uploaded version ${newVersion}`);

step(`Deploy ${newVersion} to ${percentage} % of traffic`);
const canary = wrangler(
  env,
  [
    "versions",
    "deploy",
    `${newVersion}@${percentage}`,
    `${previousVersion}@${100 - percentage}`,
    "--yes",
    "--message",
    message,
  ],
  { inherit: true },
);
if (!canary.ok)
  refuse(
    `wrangler versions deploy failed (exit ${canary.status}). ${previousVersion} should still serve all traffic: check with\n  npm run wrangler -- deployments status --env ${env}`,
  );

step(`Smoke test ${publicOrigin} (pinned to ${newVersion})`);
const canaryFailure = await smokeFailure(newVersion);
if (canaryFailure) await rollBackAndExit(`smoke test of the new version failed: ${canaryFailure}`);

if (bakeMs > 0) {
  // Interrupted here (Ctrl-C, a cancelled CI job), the canary would keep its share untested:
  // put the version before back instead (once the step under way is over).
  /** @type {string | null} */
  let interrupted = null;
  let wake = () => {};
  for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"]))
    process.once(signal, () => {
      interrupted = signal;
      wake();
    });
  const stopIfInterrupted = async () => {
    if (interrupted) await rollBackAndExit(`interrupted (${interrupted}) during the bake`);
  };
  const times = bakeSmokeTimesOf(bakeMs, smokeEveryMs);
  step(
    `Bake: ${newVersion} at ${percentage} % for ${formatDuration(bakeMs)}, ` +
      `smoke test every ${formatDuration(smokeEveryMs)} (${times.length} runs)`,
  );
  const bakeStart = Date.now();
  for (const [i, at] of times.entries()) {
    await new Promise((resolve) => {
      wake = () => resolve(undefined);
      setTimeout(resolve, Math.max(0, bakeStart + at - Date.now()));
    });
    await stopIfInterrupted();
    console.log(
      `… ${formatDuration(at)} of ${formatDuration(bakeMs)}: smoke test ${i + 1} of ${times.length}`,
    );
    const failure = await smokeFailure(newVersion);
    await stopIfInterrupted();
    if (failure)
      await rollBackAndExit(
        `smoke test during the bake failed (${formatDuration(at)} after the canary went live): ${failure}`,
      );
  }
  for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"]))
    process.removeAllListeners(signal);
  console.log(`✓ baked ${formatDuration(bakeMs)}: ${times.length} smoke tests passed`);
} else console.log("! --bake 0: promoted without a bake");

step(`Promote ${newVersion} to 100 %`);
const promote = wrangler(
  env,
  ["versions", "deploy", `${newVersion}@100`, "--yes", "--message", message],
  { inherit: true },
);
if (!promote.ok)
  await rollBackAndExit(`promotion to 100 % failed (wrangler exited ${promote.status})`);

step(`Smoke test ${publicOrigin}`);
const finalFailure = await smokeFailure(null);
if (finalFailure) await rollBackAndExit(`smoke test at 100 % failed: ${finalFailure}`);

console.log(
  `\n✓ ${env}: ${newVersion} (${revision}) serves all traffic; before it: ${previousVersion}.\n` +
    `  Watch it (docs/operations.md, "After a deploy"); roll back with: npm run rollback -- ${env}`,
);
