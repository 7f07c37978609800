#!/usr/bin/env node
// @ts-check
// `npm run dev`: apply local D1 migrations, make sure .dev.vars exists, then run `wrangler dev`.
// Extra arguments pass through (`npm run dev -- --port 9000`). State persists under .wrangler/.
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, copyFileSync, existsSync, readFileSync } from "node:fs";
import { parseDevVars, readDevVars } from "./lib/dev-vars.mjs";

process.env.WRANGLER_SEND_METRICS = "false";
// Wrangler downloads a sample `Request.cf` object (the country, colo, … Cloudflare adds to every
// request) and, offline, prints a warning with two stack traces when it cannot. The API reads
// nothing from request.cf, so use the built-in sample without asking; set
// CLOUDFLARE_CF_FETCH_ENABLED=true to fetch the real one.
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";
const args = process.argv.slice(2);

if (!existsSync(".dev.vars")) {
  copyFileSync(".dev.vars.example", ".dev.vars");
  console.log("Created .dev.vars from .dev.vars.example (local secrets).");
} else {
  // A .dev.vars from an older checkout may lack a secret added since: add it from the example.
  const have = readFileSync(".dev.vars", "utf8");
  const present = parseDevVars(have);
  const missing = readFileSync(".dev.vars.example", "utf8")
    .split("\n")
    .filter((line) => [...parseDevVars(line).keys()].some((name) => !present.has(name)));
  if (missing.length) {
    appendFileSync(".dev.vars", `${have.endsWith("\n") ? "" : "\n"}${missing.join("\n")}\n`);
    console.log(
      `Added to .dev.vars from .dev.vars.example: ${missing.map((l) => l.split("=")[0]).join(", ")}`,
    );
  }
}

const migrate = spawnSync("wrangler", ["d1", "migrations", "apply", "DB", "--local"], {
  stdio: "inherit",
  env: { ...process.env, CI: "true" },
});
if (migrate.status !== 0) process.exit(migrate.status ?? 1);

const portFlag = args.findIndex((a) => a === "--port" || a.startsWith("--port="));
const port =
  portFlag < 0
    ? "8787"
    : args[portFlag].includes("=")
      ? args[portFlag].split("=")[1]
      : args[portFlag + 1];
const devArgs = portFlag < 0 ? ["dev", "--port", port, ...args] : ["dev", ...args];
const token = readDevVars().get("ADMIN_TOKEN") ?? "<ADMIN_TOKEN from .dev.vars>";
const url = `http://localhost:${port}`;

console.log(`
Animal Store API (local) on ${url}
  Issue a key:   npm run keys -- create --plan pro --name me ${port === "8787" ? "" : `--url ${url}`}
     or: curl -s -X POST ${url}/admin/v1/keys -H "Authorization: Bearer ${token}" -H "Content-Type: application/json" -d '{"name":"me","plan":"pro"}'
  Then:          curl -s ${url}/v1/pets -H "Authorization: Bearer <key>"
  API reference: ${url}/docs   (OpenAPI: ${url}/v1/openapi.json)
`);

const dev = spawn("wrangler", devArgs, { stdio: "inherit" });
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) {
  process.on(signal, () => dev.kill(signal));
}
dev.on("exit", (code, signal) => process.exit(code ?? (signal ? 130 : 0)));
