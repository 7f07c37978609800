#!/usr/bin/env node
// @ts-check
// Operator CLI for the admin API: `npm run keys -- <command> [options]`.
import { parseArgs } from "node:util";
import { tableOf } from "./lib/cli-table.mjs";
import { readDevVars } from "./lib/dev-vars.mjs";

const USAGE = `Usage: npm run keys -- <command> [options]
Keys:
  create     --name NAME --plan free|pro|business|enterprise [--per-minute N --per-day N]
             [--expires ISO-DATE] [--owner OWNER_ID] [--meta JSON-OBJECT] [--region REGION]
             [--key-only: print only the new key: KEY=$(npm run -s keys -- create … --key-only)]
  list       [--plan PLAN] [--state active|disabled|revoked|expired|banned] [--owner OWNER_ID]
             [--q NAME-PREFIX|SECRET] [--limit N] [--cursor C]
             (a secret, even whole, is sent as its shown prefix only: URLs are logged)
  get        KEY_ID
  set-plan   KEY_ID --plan PLAN [--per-minute N --per-day N]
  rename     KEY_ID --name NAME
  set-owner  KEY_ID --owner OWNER_ID|none
  set-meta   KEY_ID --meta JSON-OBJECT|none
  set-region KEY_ID --region REGION|none   placed at its first request; a used key's object stays
  set-expiry KEY_ID --expires ISO-DATE|none
  disable    KEY_ID              refuse the key at once (401) until enabled
  enable     KEY_ID
  roll       KEY_ID [--grace SECONDS]   new secret; the old one works for SECONDS (default 86400)
  revoke     KEY_ID              final
  unban      KEY_ID
Usage history and audit:
  usage      KEY_ID [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--csv]   per day (default: last 30 days)
  usage-day  --day YYYY-MM-DD [--limit N] [--cursor C] [--csv]     every key's totals of one day
             (a day not over yet: the day so far, with the time of reading)
  audit      [KEY_ID] [--limit N] [--cursor C]                      newest first
Webhook endpoints (signed usage alerts and key events to a receiver's URL; docs/webhooks.md):
  webhook-create  HOOK_URL --events TYPE[,TYPE…] (--owner OWNER_ID | --all-owners)
                  [--description TEXT]       prints the new signing secret (whsec_…), once
  webhook-list    [--owner OWNER_ID] [--limit N] [--cursor C]
  webhook-get     WEBHOOK_ID
  webhook-update  WEBHOOK_ID [--events TYPE[,TYPE…]] [--owner OWNER_ID | --all-owners]
                  [--hook-url HOOK_URL] [--description TEXT|none]
  webhook-disable WEBHOOK_ID     no deliveries until enabled
  webhook-enable  WEBHOOK_ID     (also after its receiver answered 410 Gone)
  webhook-roll    WEBHOOK_ID [--grace SECONDS]   prints the new signing secret, once; the old
                  one also signs deliveries for SECONDS (default 86400, at most 604800; 0: none)
  webhook-delete  WEBHOOK_ID     with its delivery log
  webhook-deliveries WEBHOOK_ID [--status pending|retrying|delivered|failed|skipped|dead]
                  [--limit N] [--cursor C]    its delivery log, newest first
  webhook-test    WEBHOOK_ID     queue a webhook.test event to it
  webhook-resend  WEBHOOK_ID --delivery DELIVERY_ID   send a delivery again (same event id)
  TYPE: quota.day.warning, quota.day.exhausted, key.banned, key.unbanned, key.revoked,
        key.rolled, key.expiring
KEY_ID may also be given as --id KEY_ID, and WEBHOOK_ID (whe_…) as --id WEBHOOK_ID (once:
not both ways); a command takes one id at most.
REGION: where the key's quota object is created, a Durable Object location hint (weur, enam,
apac, …; a wrong one is refused with the list).
Output: a table on a terminal; JSON when piped or with --json (for scripts); --table forces the
table; a table or CSV with a next page ends with "More: --cursor C" on stderr. Errors go to
stderr, and the exit code is 1 (2 for a usage error: an unknown option, an argument the command
does not take, a URL that is not http(s)://host[:port]).
Options: --url URL (http(s)://host[:port]; default $ANIMAL_STORE_URL or http://localhost:8787)
         --token TOKEN (default $ADMIN_TOKEN, else ADMIN_TOKEN from .dev.vars)
         --json, --table, --help`;

/**
 * Prints `message` and the usage, and exits 2.
 * @param {string} message
 * @returns {never}
 */
const fail = (message) => {
  console.error(`${message}\n\n${USAGE}`);
  process.exit(2);
};

// A secret's shown prefix: pet_live_ or pet_test_ and 4 characters (src/schemas/keys.ts), kept
// equal by test/scripts.key-search.test.ts. The API matches no more of a secret and refuses more.
const SECRET_START = /^pet_(live|test)_/;
const SHOWN_PREFIX_LENGTH = 13;

/**
 * What `--q` sends: a name prefix as given; a secret, however much of it was pasted, only up to
 * its shown prefix, so no more of it reaches a request URL (and the logs that keep them).
 * @param {string | undefined} q
 */
const searchedFor = (q) =>
  q !== undefined && SECRET_START.test(q) ? q.slice(0, SHOWN_PREFIX_LENGTH) : q;

/** The command line, or a usage error (an unknown option, a missing value) without a stack trace. */
function parseCommandLine() {
  try {
    return parseArgs({
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
        owner: { type: "string" },
        meta: { type: "string" },
        region: { type: "string" },
        state: { type: "string" },
        q: { type: "string" },
        grace: { type: "string" },
        events: { type: "string" },
        "all-owners": { type: "boolean" },
        "hook-url": { type: "string" },
        description: { type: "string" },
        status: { type: "string" },
        delivery: { type: "string" },
        from: { type: "string" },
        to: { type: "string" },
        day: { type: "string" },
        csv: { type: "boolean" },
        limit: { type: "string" },
        cursor: { type: "string" },
        "key-only": { type: "boolean" },
        json: { type: "boolean" },
        table: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
}

const { values, positionals } = parseCommandLine();

const [command, positionalId] = positionals;
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (!command) fail("No command given.");
if (values["key-only"] && command !== "create") fail("--key-only is for create.");
if (values.json && values.table) fail("--json and --table: choose one.");
if (values.csv && (values.json || values.table))
  fail("--csv is an output of its own: drop --json or --table.");
/** A person at a terminal reads a table; a script (a pipe, or --json) reads JSON. */
const asTable = values.table || (!values.json && process.stdout.isTTY === true);
/**
 * The server's URL (`--url`, else $ANIMAL_STORE_URL, else the local server) without a trailing
 * slash; anything but http(s)://host[:port] is a usage mistake, not a server that cannot be
 * reached (`localhost:8787` without a scheme would otherwise be sent nowhere).
 */
function serverUrlOrFail() {
  const source = values.url !== undefined ? "--url" : "$ANIMAL_STORE_URL";
  const text = values.url ?? process.env.ANIMAL_STORE_URL ?? "http://localhost:8787";
  /** @type {URL | undefined} */
  let url;
  try {
    url = new URL(text);
  } catch {}
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || !url.hostname)
    fail(
      `${source} must be http(s)://host[:port], e.g. http://localhost:8787 (got ${JSON.stringify(text)}).`,
    );
  return text.replace(/\/$/, "");
}
const base = serverUrlOrFail();
const token = values.token ?? process.env.ADMIN_TOKEN ?? readDevVars().get("ADMIN_TOKEN");
if (!token) fail("No admin token: pass --token, set ADMIN_TOKEN, or create .dev.vars.");

const need = (name) => values[name] ?? fail(`--${name} is required for ${command}.`);
const keyId = () => positionalId ?? values.id ?? fail(`${command} needs a KEY_ID.`);
/**
 * A number option (`--grace 3600`) as the API writes integers: decimal digits without leading
 * zeros. Anything else is a usage error rather than Number()'s reading of it ("" and " " are 0,
 * "0x10" is 16, "1e3" is 1000): `--grace "$GRACE"` with GRACE unset must not roll with no grace.
 */
const wholeNumber = (name) =>
  /^(0|[1-9][0-9]*)$/.test(need(name))
    ? Number(values[name])
    : fail(
        `--${name} must be a whole number in decimal digits, e.g. 3600 (got ${JSON.stringify(values[name])}).`,
      );
const limits = () =>
  values["per-minute"] !== undefined || values["per-day"] !== undefined
    ? { perMinute: wholeNumber("per-minute"), perDay: wholeNumber("per-day") }
    : undefined;
/** "none" clears a field (null); anything else is sent as given. */
const orNone = (value) => (value === "none" ? null : value);
/** Marks JSON text that goes into a request body as written (see `bodyText`). */
const AS_WRITTEN = Symbol("JSON as written");
/**
 * `--meta` as written: checked to be JSON here, and sent as the text given, so that the API
 * judges what was typed (JSON.parse would keep the last of two members of one name, which the
 * API refuses).
 */
function jsonObject(name) {
  const text = values[name];
  if (text === undefined || text === "none") return text === "none" ? null : undefined;
  try {
    JSON.parse(text);
  } catch {
    return fail(`--${name} must be JSON, e.g. '{"crm":"X-1"}'.`);
  }
  return { [AS_WRITTEN]: text };
}
/** A request body as JSON text, with the values `jsonObject` returned spliced in as written. */
function bodyText(body) {
  /** @type {string[]} */
  const written = [];
  const text = JSON.stringify(body, (_, value) =>
    value !== null && typeof value === "object" && AS_WRITTEN in value
      ? `\u0000${written.push(value[AS_WRITTEN]) - 1}\u0000`
      : value,
  );
  return text.replace(/"\\u0000(\d+)\\u0000"/g, (_, i) => written[Number(i)]);
}
const key = () => `/admin/v1/keys/${encodeURIComponent(keyId())}`;
const webhook = () =>
  `/admin/v1/webhooks/${encodeURIComponent(positionalId ?? values.id ?? fail(`${command} needs a WEBHOOK_ID.`))}`;
/** `--events a,b`: the event types, as a list. */
const eventTypes = () =>
  values.events
    ?.split(",")
    .map((type) => type.trim())
    .filter(Boolean);
/**
 * `--owner OWNER_ID` (that owner's keys) or `--all-owners` (null: every key). On create one of
 * them is required, so that an endpoint never receives every owner's events by omission.
 */
function ownerOf(required) {
  if (values.owner !== undefined && values["all-owners"])
    fail("--owner and --all-owners: choose one.");
  if (values["all-owners"]) return null;
  if (values.owner === undefined && required)
    fail(`${command} needs --owner OWNER_ID, or --all-owners for every owner's keys.`);
  return values.owner;
}
const query = (params) => {
  const defined = Object.entries(params).filter(([, v]) => v !== undefined && v !== "");
  return defined.length ? `?${new URLSearchParams(defined)}` : "";
};

const requests = {
  create: () => [
    "POST",
    "/admin/v1/keys",
    {
      name: need("name"),
      plan: need("plan"),
      limits: limits(),
      expiresAt: values.expires,
      ownerId: values.owner,
      meta: jsonObject("meta"),
      region: values.region,
    },
  ],
  list: () => [
    "GET",
    `/admin/v1/keys${query({
      plan: values.plan,
      state: values.state,
      ownerId: values.owner,
      q: searchedFor(values.q),
      limit: values.limit,
      cursor: values.cursor,
    })}`,
  ],
  get: () => ["GET", key()],
  "set-plan": () => ["PATCH", key(), { plan: need("plan"), limits: limits() }],
  rename: () => ["PATCH", key(), { name: need("name") }],
  "set-owner": () => ["PATCH", key(), { ownerId: orNone(need("owner")) }],
  "set-meta": () => ["PATCH", key(), { meta: (need("meta"), jsonObject("meta")) }],
  "set-region": () => ["PATCH", key(), { region: orNone(need("region")) }],
  "set-expiry": () => ["PATCH", key(), { expiresAt: orNone(need("expires")) }],
  disable: () => ["PATCH", key(), { enabled: false }],
  enable: () => ["PATCH", key(), { enabled: true }],
  roll: () => [
    "POST",
    `${key()}/roll`,
    values.grace === undefined ? {} : { gracePeriodSeconds: wholeNumber("grace") },
  ],
  revoke: () => ["DELETE", key()],
  unban: () => ["POST", `${key()}/unban`],
  usage: () => ["GET", `${key()}/usage${query({ from: values.from, to: values.to })}`],
  "usage-day": () => [
    "GET",
    `/admin/v1/usage${query({ day: need("day"), limit: values.limit, cursor: values.cursor })}`,
  ],
  audit: () => [
    "GET",
    `/admin/v1/audit${query({
      keyId: positionalId ?? values.id,
      limit: values.limit,
      cursor: values.cursor,
    })}`,
  ],
  "webhook-create": () => [
    "POST",
    "/admin/v1/webhooks",
    {
      url: positionalId ?? values["hook-url"] ?? fail("webhook-create needs a HOOK_URL."),
      eventTypes: eventTypes() ?? fail("--events is required for webhook-create."),
      ownerId: ownerOf(true),
      description: values.description,
    },
  ],
  "webhook-list": () => [
    "GET",
    `/admin/v1/webhooks${query({ ownerId: values.owner, limit: values.limit, cursor: values.cursor })}`,
  ],
  "webhook-get": () => ["GET", webhook()],
  "webhook-update": () => [
    "PATCH",
    webhook(),
    {
      url: values["hook-url"],
      eventTypes: eventTypes(),
      ownerId: ownerOf(false),
      description: values.description === undefined ? undefined : orNone(values.description),
    },
  ],
  "webhook-disable": () => ["PATCH", webhook(), { enabled: false }],
  "webhook-enable": () => ["PATCH", webhook(), { enabled: true }],
  "webhook-roll": () => [
    "POST",
    `${webhook()}/roll-secret`,
    values.grace === undefined ? {} : { gracePeriodSeconds: wholeNumber("grace") },
  ],
  "webhook-delete": () => ["DELETE", webhook()],
  "webhook-deliveries": () => [
    "GET",
    `${webhook()}/deliveries${query({ status: values.status, limit: values.limit, cursor: values.cursor })}`,
  ],
  "webhook-test": () => ["POST", `${webhook()}/test`],
  "webhook-resend": () => [
    "POST",
    `${webhook()}/deliveries/${encodeURIComponent(need("delivery"))}/resend`,
  ],
};
if (!Object.hasOwn(requests, command)) fail(`Unknown command: ${command}`);
/** The commands that take no argument after their name (their input is options only). */
const TAKES_NO_ARGUMENT = ["create", "list", "usage-day", "webhook-list"];
/**
 * Refuses what a command would otherwise ignore: an argument it does not take, or its one
 * argument given twice (as an argument and as an option), so that `disable A B` never disables
 * only A.
 */
function refuseIgnoredArguments() {
  const [, argument, ...extra] = positionals;
  if (TAKES_NO_ARGUMENT.includes(command)) {
    if (argument !== undefined) fail(`Unexpected argument: ${argument}.`);
    if (values.id !== undefined) fail(`${command} takes no id: drop --id.`);
    return;
  }
  if (extra.length > 0) fail(`Unexpected argument: ${extra[0]}.`);
  if (command === "webhook-create") {
    if (values.id !== undefined) fail(`${command} takes no id: drop --id.`);
    if (argument !== undefined && values["hook-url"] !== undefined)
      fail(`${command}: give the HOOK_URL once, as an argument or as --hook-url, not both.`);
  } else if (argument !== undefined && values.id !== undefined)
    fail(`${command}: give the id once, as an argument or as --id, not both.`);
}
refuseIgnoredArguments();
/** The commands whose answer holds a signing secret, shown only in that answer. */
const GIVES_WEBHOOK_SECRET = ["webhook-create", "webhook-roll"];

const [method, path, body] = requests[command]();
let res;
try {
  res = await fetch(base + path, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body ? { "Content-Type": "application/json" } : {}),
      ...(values.csv ? { Accept: "text/csv" } : {}),
    },
    body: body ? bodyText(body) : undefined,
  });
} catch (err) {
  const failure = /** @type {Error & { cause?: { code?: string } }} */ (err);
  console.error(
    `Cannot reach ${base}: ${failure.cause?.code ?? failure.message}. Is the server running (npm run dev)?`,
  );
  process.exit(1);
}
const text = await res.text();
if (values["key-only"] && command === "create" && res.ok) {
  console.log(JSON.parse(text).key);
  process.exit(0);
}
/** @type {unknown} */
let parsed;
try {
  parsed = JSON.parse(text);
} catch {}
let out = text;
if (parsed !== undefined && !values.csv) {
  const error = /** @type {{ code?: string, message?: string, status?: number }} */ (parsed);
  if (!asTable) out = JSON.stringify(parsed, null, 2);
  else if (!res.ok && error.code)
    out = `${error.status ?? res.status} ${error.code}: ${error.message}`;
  else if (res.ok && GIVES_WEBHOOK_SECRET.includes(command)) {
    // The secret once, apart from the fields, where it cannot be missed.
    const { secret, ...endpoint } = /** @type {{ secret?: string }} */ (parsed);
    out = `${tableOf(command, endpoint)}\n\nSigning secret (shown only this once; the receiver verifies signatures with it):\n\n  ${secret}\n`;
  } else out = tableOf(command, parsed);
}
if (res.status === 204) {
  // Nothing to print on stdout (a script reading JSON gets nothing rather than something new).
  console.error(`Deleted ${positionalId ?? values.id} and its delivery log.`);
  process.exit(0);
}
(res.ok ? process.stdout : process.stderr).write(out.endsWith("\n") ? out : `${out}\n`);
// A day not over yet is the day so far: said beside the totals, never silently.
const asOf =
  res.ok && command === "usage-day"
    ? (res.headers.get("Usage-As-Of") ??
      (values.csv ? null : /** @type {{ asOf?: string }} */ (parsed)?.asOf))
    : null;
if (asOf)
  console.error(
    `${values.day} is not over: these totals are the day so far, as of ${asOf.slice(11, 16)} UTC.`,
  );
// A next page, said beside the rows: the CSV's Next-Cursor header, or a table's nextCursor (which
// JSON for a script carries in its body).
const nextCursor =
  res.headers.get("Next-Cursor") ??
  (asTable && !values.csv ? /** @type {{ nextCursor?: unknown }} */ (parsed)?.nextCursor : null);
if (res.ok && nextCursor) console.error(`More: --cursor ${nextCursor}`);
if (res.ok && (command === "create" || command === "roll"))
  console.error("\nStore the key now: it is shown only once.");
if (res.ok && !asTable && GIVES_WEBHOOK_SECRET.includes(command))
  console.error('\nStore the signing secret ("secret") now: it is shown only once.');
process.exit(res.ok ? 0 : 1);
