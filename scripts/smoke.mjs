#!/usr/bin/env node
// @ts-check
// `npm run smoke -- --url URL [--token ADMIN_TOKEN]`: the smoke test of a running environment
// (scripts/lib/smoke.mjs says what it checks). The admin token comes from --token, else
// $ADMIN_TOKEN, else, for a server on this machine (`npm run dev`), from .dev.vars. Exits 0 when
// every check passed, 1 naming the check that failed (also when the URL does not answer), 2 for
// bad arguments.
import { parseArgs } from "node:util";
import { readDevVars } from "./lib/dev-vars.mjs";
import { runSmokeOrThrow, SmokeFailure } from "./lib/smoke.mjs";

const usage = "Usage: npm run smoke -- --url URL [--token ADMIN_TOKEN]";

/**
 * @param {string} message
 * @returns {never}
 */
function exitWithUsage(message) {
  console.error(`${message}\n${usage}`);
  process.exit(2);
}

/** @returns {{ url?: string, token?: string }} */
function optionsOrExit() {
  try {
    return parseArgs({
      options: { url: { type: "string" }, token: { type: "string" } },
      strict: true,
    }).values;
  } catch (err) {
    return exitWithUsage(err instanceof Error ? err.message : String(err));
  }
}
const values = optionsOrExit();
const url = values.url ?? exitWithUsage("--url is required.");
if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
  exitWithUsage(`--url ${url} is not an http(s) URL.`);

const isLocal = ["localhost", "127.0.0.1", "[::1]"].includes(new URL(url).hostname);
/** The local server's admin token: ADMIN_TOKEN, else the first of ADMIN_TOKENS. */
function localAdminToken() {
  const vars = readDevVars();
  const firstNamed = vars.get("ADMIN_TOKENS")?.split(",")[0] ?? "";
  return vars.get("ADMIN_TOKEN") || firstNamed.slice(firstNamed.indexOf(":") + 1).trim();
}
const adminToken =
  values.token ||
  process.env.ADMIN_TOKEN ||
  (isLocal ? localAdminToken() : undefined) ||
  exitWithUsage(
    `No admin token: pass --token or set ADMIN_TOKEN${isLocal ? " (or run from a checkout with .dev.vars)" : ""}.`,
  );

console.log(`Smoke test of ${url}`);
try {
  const passed = await runSmokeOrThrow({ url, adminToken, log: (line) => console.log(line) });
  console.log(`✓ all ${passed.length} checks passed`);
} catch (err) {
  if (!(err instanceof SmokeFailure)) throw err;
  console.error(`✗ ${err.message}`);
  console.error(`Smoke test FAILED at "${err.check}".`);
  process.exit(1);
}
