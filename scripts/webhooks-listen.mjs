#!/usr/bin/env node
// @ts-check
// `npm run webhooks:listen`: a local webhook receiver that prints each delivery it verifies.
// It registers itself as an endpoint of the local server (every event type, every owner) and
// deletes that endpoint when stopped (Ctrl-C); with --secret it only listens, for an endpoint
// registered by hand. Each delivery's Standard Webhooks signature is checked with node:crypto
// (independently of the service's own code): HMAC-SHA256 over `id.timestamp.body`, a timestamp
// within 5 minutes. A repeated webhook-id is printed as a duplicate (at-least-once delivery).
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { localAdminToken } from "./lib/dev-vars.mjs";

const USAGE = `Usage: npm run webhooks:listen -- [options]
  --port P        listen on http://localhost:P/ (default 8788)
  --url URL       the API to register with (default http://localhost:8787)
  --token T       its admin token (default ADMIN_TOKEN from .dev.vars)
  --secret S      do not register: verify with this signing secret (whsec_…)
  --events LIST   event types to register for, comma-separated (default: all)
  --fail N        answer 500 to the first N attempts of each event (to watch the retries)
  --json          print one JSON object per delivery instead of a line of text
  -h, --help      this text`;

/** @type {{ values: Record<string, string | boolean | undefined> }} */
let parsed;
try {
  parsed = parseArgs({
    options: {
      port: { type: "string", default: "8788" },
      url: { type: "string", default: "http://localhost:8787" },
      token: { type: "string" },
      secret: { type: "string" },
      events: { type: "string" },
      fail: { type: "string", default: "0" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
} catch (err) {
  console.error(`${err instanceof Error ? err.message : err}\n\n${USAGE}`);
  process.exit(2);
}
const opts = parsed.values;
if (opts.help) {
  console.log(USAGE);
  process.exit(0);
}
const port = Number(opts.port);
const failFirst = Number(opts.fail);
if (!Number.isInteger(port) || !Number.isInteger(failFirst) || failFirst < 0) {
  console.error(`--port and --fail take whole numbers\n\n${USAGE}`);
  process.exit(2);
}
const apiUrl = String(opts.url).replace(/\/$/, "");
const token = /** @type {string | undefined} */ (opts.token) ?? localAdminToken();
// The API's event types (src/schemas/webhooks.ts), kept equal by test/scripts.webhook-event-types.test.ts.
const ALL_EVENTS = [
  "quota.day.warning",
  "quota.day.exhausted",
  "key.banned",
  "key.unbanned",
  "key.revoked",
  "key.rolled",
  "key.expiring",
];

/**
 * Whether the Standard Webhooks headers sign `body` under `secret`.
 * @param {string} secret
 * @param {import("node:http").IncomingHttpHeaders} headers
 * @param {string} body
 */
function verified(secret, headers, body) {
  const id = String(headers["webhook-id"] ?? "");
  const timestamp = String(headers["webhook-timestamp"] ?? "");
  const signatures = String(headers["webhook-signature"] ?? "");
  if (!id || !/^\d+$/.test(timestamp) || !signatures) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected = Buffer.from(
    `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`,
  );
  return signatures.split(" ").some((given) => {
    const bytes = Buffer.from(given);
    return bytes.length === expected.length && timingSafeEqual(bytes, expected);
  });
}

/** Registers this receiver with the API; returns the endpoint's id and signing secret. */
async function register() {
  const res = await fetch(`${apiUrl}/admin/v1/webhooks`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      url: `http://localhost:${port}/`,
      eventTypes: opts.events ? String(opts.events).split(",") : ALL_EVENTS,
      description: "npm run webhooks:listen",
    }),
  }).catch((err) => {
    console.error(
      `Cannot reach ${apiUrl} (${err.cause?.code ?? err}). Is \`npm run dev\` running?`,
    );
    process.exit(1);
  });
  const body = /** @type {{ id: string, secret: string, message?: string }} */ (await res.json());
  if (res.status !== 201) {
    console.error(`Registering the endpoint failed: ${res.status} ${body.message ?? ""}`);
    if (/must use https/.test(body.message ?? ""))
      console.error(
        "The server must allow local receivers: npm run dev turns WEBHOOK_LOCAL_RECEIVERS on.",
      );
    process.exit(1);
  }
  return { id: body.id, secret: body.secret };
}

const endpoint = opts.secret ? { id: null, secret: String(opts.secret) } : await register();
/** Attempts seen per webhook-id, and the ids already accepted. */
const attempts = new Map();
const accepted = new Set();

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const id = String(req.headers["webhook-id"] ?? "");
    const ok = req.method === "POST" && verified(endpoint.secret, req.headers, body);
    const attempt = (attempts.get(id) ?? 0) + 1;
    attempts.set(id, attempt);
    const failing = ok && attempt <= failFirst;
    const duplicate = ok && !failing && accepted.has(id);
    if (ok && !failing) accepted.add(id);
    /** @type {any} */
    let event = null;
    try {
      event = JSON.parse(body);
    } catch {}
    const status = !ok ? 401 : failing ? 500 : 204;
    const line = {
      id,
      type: event?.type ?? null,
      verified: ok,
      duplicate,
      attempt,
      answered: status,
      key: event?.data?.key?.id ?? null,
      data: event?.data ?? null,
    };
    if (opts.json) console.log(JSON.stringify(line));
    else {
      const d = event?.data ?? {};
      const numbers =
        d.limit !== undefined ? ` ${d.used ?? "?"}/${d.limit} until ${d.resetAt}` : "";
      console.log(
        `${new Date().toISOString()} ${ok ? "verified" : "NOT VERIFIED"} ${line.type} ${id}` +
          `${line.key ? ` key ${line.key}` : ""}${numbers}` +
          `${duplicate ? " (duplicate)" : ""}${failing ? ` → 500 (attempt ${attempt})` : ""}`,
      );
    }
    res.writeHead(status).end();
  });
});

server.listen(port, "localhost", () => {
  if (!opts.json)
    console.log(
      `Listening on http://localhost:${port}/${endpoint.id ? ` as webhook endpoint ${endpoint.id}` : ""}; Ctrl-C stops.`,
    );
  else console.log(JSON.stringify({ listening: port, endpoint: endpoint.id }));
});

async function stop() {
  server.close();
  if (endpoint.id)
    await fetch(`${apiUrl}/admin/v1/webhooks/${endpoint.id}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${token}` },
    }).catch(() => undefined);
  process.exit(0);
}
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
