#!/usr/bin/env node
// `npm run deploy:staging` / `deploy:production`: refuse to deploy without the Worker's secrets,
// then apply that environment's D1 migrations remotely, then deploy.
import { spawnSync } from "node:child_process";

const REQUIRED_SECRETS = ["ADMIN_TOKEN", "CURSOR_SECRET"];
const env = process.argv[2];
if (env !== "staging" && env !== "production") {
  console.error("Usage: node scripts/deploy.mjs staging|production");
  process.exit(2);
}
const wrangler = (args, opts = {}) =>
  spawnSync("wrangler", [...args, "--env", env], {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    ...opts,
  });

const list = wrangler(["secret", "list", "--format", "json"]);
let names = [];
try {
  names = JSON.parse(list.stdout).map((s) => s.name);
} catch {
  console.error(`Could not list the ${env} Worker's secrets:\n${list.stderr || list.stdout}`);
}
const missing = REQUIRED_SECRETS.filter((n) => !names.includes(n));
if (missing.length) {
  console.error(
    `Not deploying ${env}: missing secret(s) ${missing.join(", ")}. Set each with\n` +
      missing
        .map((n) => `  openssl rand -base64 32 | npm run wrangler -- secret put ${n} --env ${env}`)
        .join("\n"),
  );
  process.exit(1);
}
for (const step of [["d1", "migrations", "apply", "DB", "--remote"], ["deploy"]]) {
  const run = wrangler(step, { stdio: "inherit" });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
