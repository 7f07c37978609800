// @ts-check
// Reads .dev.vars (the local secrets wrangler dev loads) for the scripts: the names it sets, and
// their values, in the dotenv forms wrangler accepts (`NAME=value`, `export NAME = "value"`).
import { existsSync, readFileSync } from "node:fs";

const ASSIGNMENT = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(.*?)\s*$/;

/** Name → value for every assignment in `text`; comments and blank lines are skipped. */
export function parseDevVars(text) {
  const vars = new Map();
  for (const line of text.split("\n")) {
    const m = line.match(ASSIGNMENT);
    if (m) vars.set(m[1], m[2].replace(/^(["'])(.*)\1$/, "$2"));
  }
  return vars;
}

/** The variables of `file` (default .dev.vars), or an empty map when it does not exist. */
export function readDevVars(file = ".dev.vars") {
  return existsSync(file) ? parseDevVars(readFileSync(file, "utf8")) : new Map();
}

/** The local server's admin token from .dev.vars: ADMIN_TOKEN, else the first of ADMIN_TOKENS. */
export function localAdminToken() {
  const vars = readDevVars();
  const firstNamed = vars.get("ADMIN_TOKENS")?.split(",")[0] ?? "";
  return vars.get("ADMIN_TOKEN") || firstNamed.slice(firstNamed.indexOf(":") + 1).trim();
}

/** Whether `url` is a server on this machine (whose admin token .dev.vars holds). */
export const isLocalUrl = (/** @type {string} */ url) =>
  ["localhost", "127.0.0.1", "[::1]"].includes(new URL(url).hostname);
