// @ts-check
// Runs the `wrangler` on PATH (node_modules/.bin under `npm run`) against one environment, for
// the scripts that change remote environments: deploy, rollback and set-secrets.
import { spawnSync } from "node:child_process";

/**
 * `wrangler <args> --env <env>`; output captured unless `inherit` (then shown as it comes).
 * `input` goes to its standard input (secret values: never on the command line).
 * @param {string} env
 * @param {string[]} args
 * @param {{ inherit?: boolean, extraEnv?: Record<string, string>, input?: string }} [options]
 */
export function wrangler(env, args, { inherit = false, extraEnv = {}, input } = {}) {
  const run = spawnSync("wrangler", [...args, "--env", env], {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", ...extraEnv },
    input,
    stdio: inherit
      ? [input === undefined ? "inherit" : "pipe", "inherit", "inherit"]
      : [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  return {
    ok: run.status === 0,
    status: run.status ?? 1,
    output: `${run.stdout ?? ""}${run.stderr ?? ""}${run.error ? String(run.error) : ""}`,
  };
}

/** Why wrangler cannot act on the account (not logged in, no API token), or null when it can. */
export function loginProblem(/** @type {string} */ env) {
  const whoami = wrangler(env, ["whoami", "--json"]);
  if (whoami.ok && !/not authenticated|not logged in/i.test(whoami.output)) return null;
  return (
    "wrangler is not logged in to Cloudflare. Either run\n  npm run wrangler -- login\n" +
    "or set an API token (with Workers Scripts, D1 and Workers Routes edit permissions):\n" +
    "  export CLOUDFLARE_API_TOKEN=…  CLOUDFLARE_ACCOUNT_ID=…"
  );
}
