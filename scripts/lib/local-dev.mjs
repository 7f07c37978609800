// @ts-check
// Starts the API locally the way `npm run dev` does: apply local D1 migrations, make sure
// .dev.vars exists, then run `wrangler dev` (state under .wrangler/, secrets from .dev.vars).
// `npm run bench:serve` starts the bench entry Worker the same way.
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, copyFileSync, existsSync, readFileSync } from "node:fs";
import { parseDevVars, readDevVars } from "./dev-vars.mjs";

/** Creates .dev.vars from .dev.vars.example, or adds the secrets it lacks. */
function ensureDevVars() {
  if (!existsSync(".dev.vars")) {
    copyFileSync(".dev.vars.example", ".dev.vars");
    console.log("Created .dev.vars from .dev.vars.example (local secrets).");
    return;
  }
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

/**
 * Applies the pending local D1 migrations and prints one line saying which (wrangler's own
 * output, a table per migration, is printed only when applying fails). Exits if it fails.
 */
function applyLocalMigrations() {
  const migrate = spawnSync("wrangler", ["d1", "migrations", "apply", "DB", "--local"], {
    encoding: "utf8",
    env: { ...process.env, CI: "true" },
  });
  const output = `${migrate.stdout ?? ""}${migrate.stderr ?? ""}`;
  if (migrate.status !== 0) {
    process.stderr.write(output);
    console.error("Applying the local D1 migrations failed (output above).");
    process.exit(migrate.status ?? 1);
  }
  const applied = [
    ...new Set(output.match(/^│ *\d{4}_[\w.-]+\.sql *│ *✅/gm)?.map((row) => row.split(/ +/)[1])),
  ];
  console.log(
    applied.length
      ? `Local database: applied ${applied.length} migration(s), ${applied[0]} to ${applied.at(-1)}.`
      : "Local database: up to date.",
  );
}

/** The port in wrangler dev arguments (`--port P` or `--port=P`), or null. */
function portIn(args) {
  const at = args.findIndex((a) => a === "--port" || a.startsWith("--port="));
  if (at < 0) return null;
  return args[at].includes("=") ? args[at].split("=")[1] : args[at + 1];
}

/**
 * Runs `wrangler dev` in the foreground with `args` (passed through), on port 8787 unless they
 * name one; with `entry`, that entry point instead of wrangler.toml's `main`. Exits when it does.
 * @param {{ args: string[], entry?: string, title?: string }} options
 */
export function runLocalDev({ args, entry, title = "Animal Store API (local)" }) {
  process.env.WRANGLER_SEND_METRICS = "false";
  // Wrangler downloads a sample `Request.cf` object (the country, colo, … Cloudflare adds to
  // every request) and, offline, prints a warning with two stack traces when it cannot. The API
  // reads nothing from request.cf, so use the built-in sample without asking; set
  // CLOUDFLARE_CF_FETCH_ENABLED=true to fetch the real one.
  process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

  ensureDevVars();
  applyLocalMigrations();

  const port = portIn(args) ?? "8787";
  const devArgs = [
    "dev",
    ...(entry ? [entry] : []),
    ...(portIn(args) ? [] : ["--port", port]),
    // Webhook endpoints may be http://localhost receivers (npm run webhooks:listen), locally only.
    "--var",
    "WEBHOOK_LOCAL_RECEIVERS:on",
    ...args,
  ];
  const token = readDevVars().get("ADMIN_TOKEN") ?? "<ADMIN_TOKEN from .dev.vars>";
  const url = `http://localhost:${port}`;

  console.log(`
${title} on ${url}
  Issue a key:   npm run keys -- create --plan pro --name me ${port === "8787" ? "" : `--url ${url}`}
     or: curl -s -X POST ${url}/admin/v1/keys -H "Authorization: Bearer ${token}" -H "Content-Type: application/json" -d '{"name":"me","plan":"pro"}'
  Then:          curl -s ${url}/v1/pets -H "Authorization: Bearer <key>"
  API reference: ${url}/docs   (OpenAPI: ${url}/v1/openapi.json)
  Console:       ${url}/admin   Sample pets: npm run seed
  Webhooks:      npm run webhooks:listen${port === "8787" ? "" : ` -- --url ${url}`}   (prints each verified delivery)
`);

  const dev = spawn("wrangler", devArgs, { stdio: "inherit" });
  for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) {
    process.on(signal, () => dev.kill(signal));
  }
  dev.on("exit", (code, signal) => process.exit(code ?? (signal ? 130 : 0)));
}
