#!/usr/bin/env node
// `npm run deploy:staging` / `deploy:production`, in order, stopping at the first problem:
//   1. the environment's wrangler.toml block has a real D1 database_id and PUBLIC_ORIGIN (not the
//      placeholders this repository ships with);
//   2. wrangler is logged in (`wrangler login`, or CLOUDFLARE_API_TOKEN);
//   3. the Worker's secrets are set;
// then applies that environment's D1 migrations remotely and deploys.
import { spawnSync } from "node:child_process";
import { unstable_readConfig } from "wrangler";

// Each entry: the secrets of which one must be set (named ADMIN_TOKENS may replace ADMIN_TOKEN).
const REQUIRED_SECRETS = [["ADMIN_TOKEN", "ADMIN_TOKENS"], ["CURSOR_SECRET"]];
const env = process.argv[2];
if (env !== "staging" && env !== "production") {
  console.error("Usage: node scripts/deploy.mjs staging|production");
  process.exit(2);
}
const refuse = (message) => {
  console.error(`Not deploying ${env}: ${message}`);
  process.exit(1);
};
const wrangler = (args, opts = {}) =>
  spawnSync("wrangler", [...args, "--env", env], {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    ...opts,
  });

/** A UUID made of at most three distinct hex digits (00000000-0000-4000-8000-…) is a placeholder. */
const isPlaceholderId = (id) => !id || new Set(id.replace(/-/g, "")).size <= 3;
const isPlaceholderOrigin = (origin) =>
  !origin ||
  /(^|\.)example\.(com|org|net)$|\.example\.workers\.dev$/.test(new URL(origin).hostname);

// 1. Configuration.
const config = unstable_readConfig({ config: "wrangler.toml", env });
for (const db of config.d1_databases ?? []) {
  if (isPlaceholderId(db.database_id))
    refuse(
      `[env.${env}] D1 binding ${db.binding} still has the placeholder database_id ${db.database_id}.\n` +
        `Create the database and put its id into wrangler.toml:\n  npm run wrangler -- d1 create ${db.database_name}`,
    );
}
if (isPlaceholderOrigin(config.vars?.PUBLIC_ORIGIN))
  refuse(
    `[env.${env}.vars] PUBLIC_ORIGIN is ${config.vars?.PUBLIC_ORIGIN ? `the placeholder ${config.vars.PUBLIC_ORIGIN}` : "empty"}: ` +
      "set it to the origin this environment is served from (its links and OpenAPI servers name it).",
  );

// 2. Login: a missing login is reported as such, not as missing secrets.
const whoami = wrangler(["whoami"]);
const whoamiText = `${whoami.stdout}\n${whoami.stderr}`;
if (whoami.status !== 0 || /not authenticated|not logged in/i.test(whoamiText))
  refuse(
    "wrangler is not logged in to Cloudflare. Either run\n  npm run wrangler -- login\n" +
      "or set an API token (with Workers, D1 and Workers Scripts edit permissions):\n" +
      "  export CLOUDFLARE_API_TOKEN=…  CLOUDFLARE_ACCOUNT_ID=…",
  );

// 3. Secrets.
const list = wrangler(["secret", "list", "--format", "json"]);
let names;
try {
  names = JSON.parse(list.stdout).map((s) => s.name);
} catch {
  // The Worker may not exist yet (first deploy): then no secret is set either.
  if (!/not found|does not exist|10007/i.test(`${list.stdout}${list.stderr}`))
    refuse(`could not list the Worker's secrets:\n${list.stderr || list.stdout}`);
  names = [];
}
const missing = REQUIRED_SECRETS.filter((anyOf) => !anyOf.some((n) => names.includes(n))).map(
  (anyOf) => anyOf[0],
);
if (missing.length)
  refuse(
    `missing secret(s) ${missing.join(", ")}. Generate, keep and set each (see README, "Deploy"):\n` +
      missing
        .map(
          (n) =>
            `  ${n}=$(openssl rand -base64 32); echo "$${n}"; echo "$${n}" | npm run wrangler -- secret put ${n} --env ${env}`,
        )
        .join("\n"),
  );

for (const step of [["d1", "migrations", "apply", "DB", "--remote"], ["deploy"]]) {
  const run = wrangler(step, { stdio: "inherit" });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
