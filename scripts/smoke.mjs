#!/usr/bin/env node
// @ts-check
// `npm run smoke -- --url URL [--token ADMIN_TOKEN]`: the smoke test of a running environment
// (scripts/lib/smoke.mjs says what it checks). The admin token comes from --token, else
// $ADMIN_TOKEN, else, for a server on this machine (`npm run dev`), from .dev.vars. Exits 0 when
// every check passed, 1 naming the check that failed (also when the URL does not answer), 2 for
// bad arguments.
import { parseArgs } from "node:util";
import { isLocalUrl, localAdminToken } from "./lib/dev-vars.mjs";
import { runSmokeOrThrow, SmokeFailure } from "./lib/smoke.mjs";

const usage = `Usage: npm run smoke -- --url URL [--token ADMIN_TOKEN]
Runs the smoke test against a running environment: the OpenAPI document, a request with the
smoke key, its rate-limit headers, a 401 without a key and /docs. The smoke key is one key named
smoke-test, reused: enabled with a fresh secret for the run, disabled after it.
  --url URL      the environment's origin (http or https)
  --token TOKEN  an admin token with full access (default $ADMIN_TOKEN; for a URL on this
                 machine, ADMIN_TOKEN from .dev.vars)
  --help, -h     this text
Exit codes: 0 every check passed, 1 a check failed (named), 2 bad arguments.`;

/**
 * @param {string} message
 * @returns {never}
 */
function exitWithUsage(message) {
  console.error(`${message}\n${usage}`);
  process.exit(2);
}

/** @returns {{ url?: string, token?: string, help?: boolean }} */
function optionsOrExit() {
  try {
    return parseArgs({
      options: {
        url: { type: "string" },
        token: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }).values;
  } catch (err) {
    return exitWithUsage(err instanceof Error ? err.message : String(err));
  }
}
const values = optionsOrExit();
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const url = values.url ?? exitWithUsage("--url is required.");
if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
  exitWithUsage(`--url ${url} is not an http(s) URL.`);

const isLocal = isLocalUrl(url);
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
