#!/usr/bin/env node
// Operator CLI for the admin key API: `npm run keys -- <command> [options]`.
import { parseArgs } from "node:util";
import { readDevVars } from "./lib/dev-vars.mjs";

const USAGE = `Usage: npm run keys -- <command> [options]
  create   --name NAME --plan free|pro|business|enterprise [--per-minute N --per-day N] [--expires ISO-DATE]
           [--key-only: print nothing but the new key, e.g. KEY=$(npm run -s keys -- create … --key-only)]
  list     [--limit N] [--cursor C]
  get      --id KEY_ID
  set-plan --id KEY_ID --plan PLAN [--per-minute N --per-day N]
  rename   --id KEY_ID --name NAME
  revoke   --id KEY_ID
  unban    --id KEY_ID
Options: --url URL (default $ANIMAL_STORE_URL or http://localhost:8787)
         --token TOKEN (default $ADMIN_TOKEN, else ADMIN_TOKEN from .dev.vars)`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string" },
    token: { type: "string" },
    name: { type: "string" },
    plan: { type: "string" },
    id: { type: "string" },
    "per-minute": { type: "string" },
    "per-day": { type: "string" },
    expires: { type: "string" },
    limit: { type: "string" },
    cursor: { type: "string" },
    "key-only": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
});

const fail = (message) => {
  console.error(`${message}\n\n${USAGE}`);
  process.exit(2);
};

const [command] = positionals;
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (!command) fail("No command given.");
if (values["key-only"] && command !== "create") fail("--key-only is for create.");
const base = (values.url ?? process.env.ANIMAL_STORE_URL ?? "http://localhost:8787").replace(
  /\/$/,
  "",
);
const token = values.token ?? process.env.ADMIN_TOKEN ?? readDevVars().get("ADMIN_TOKEN");
if (!token) fail("No admin token: pass --token, set ADMIN_TOKEN, or create .dev.vars.");

const need = (name) => values[name] ?? fail(`--${name} is required for ${command}.`);
const limits = () =>
  values["per-minute"] || values["per-day"]
    ? { perMinute: Number(need("per-minute")), perDay: Number(need("per-day")) }
    : undefined;
const key = () => `/admin/v1/keys/${encodeURIComponent(need("id"))}`;

const requests = {
  create: () => [
    "POST",
    "/admin/v1/keys",
    { name: need("name"), plan: need("plan"), limits: limits(), expiresAt: values.expires },
  ],
  list: () => [
    "GET",
    `/admin/v1/keys?${new URLSearchParams(Object.entries({ limit: values.limit, cursor: values.cursor }).filter(([, v]) => v))}`,
  ],
  get: () => ["GET", key()],
  "set-plan": () => ["PATCH", key(), { plan: need("plan"), limits: limits() }],
  rename: () => ["PATCH", key(), { name: need("name") }],
  revoke: () => ["DELETE", key()],
  unban: () => ["POST", `${key()}/unban`],
};
if (!requests[command]) fail(`Unknown command: ${command}`);

const [method, path, body] = requests[command]();
let res;
try {
  res = await fetch(base + path, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body ? { "Content-Type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
} catch (err) {
  console.error(
    `Cannot reach ${base}: ${err.cause?.code ?? err.message}. Is the server running (npm run dev)?`,
  );
  process.exit(1);
}
const text = await res.text();
if (values["key-only"] && command === "create" && res.ok) {
  console.log(JSON.parse(text).key);
  process.exit(0);
}
let out = text;
try {
  out = JSON.stringify(JSON.parse(text), null, 2);
} catch {}
(res.ok ? console.log : console.error)(out);
if (res.ok && command === "create") console.error("\nStore the key now: it is shown only once.");
process.exit(res.ok ? 0 : 1);
