// @ts-check
// `npm run soak -- --seconds N` (default 20, at most 600): mixed traffic (list, filtered list,
// create, get) from keys of every plan against a local `wrangler dev`, concurrently, for N
// seconds; loopback only, bounded in time and in requests per key. Exits non-zero if a check fails:
//   1. every key's admitted count is exactly what its limits allow (model below), window by window;
//   2. every key's quota object counted exactly the requests the client saw admitted;
//   3. no 5xx, no network errors, no 401 (all keys are valid);
//   4. every 2xx body has the documented shape;
//   5. every created pet reads back unchanged afterwards, with a fresh key.
//
// The exact expectation. The limiter uses fixed UTC windows (the minute, the day). A request is
// "admitted" when its response is neither 429 (refused by the limiter) nor 401 (never reached
// it). The window a request was decided in is read from its RateLimit header ("minute";t=<s to
// reset>) together with the client's send/receive times on the same clock, so requests near a
// minute boundary are attributed exactly. Then, per key, window by window:
//     admitted(w) = 0                                         if the key is banned
//                 = min(sent(w), perMinute, perDay − admitted earlier that day)   otherwise
// The order of requests within a window does not matter: refusals only happen once the window is
// full. A key is banned once its refusals in one window exceed max(10, perMinute) and stays
// banned for BAN_MINUTES (pinned to 15 here, longer than any run), which the model carries into
// later windows. "Polite" keys honour Retry-After (at most one refusal per worker per window, so
// never banned); "aggressive" keys keep sending and get banned once they pass the threshold.
// A banned key's 429 carries the ban's reset, not the minute's; the few such responses sent
// across a minute boundary are refusals on either side of it, and every placement is tried.
import { cleanupNow, issueKey, startApi } from "../scripts/lib/local-server.mjs";
import { optionsOrExit } from "./lib/options.mjs";
import { seedPets, UNLIMITED } from "./lib/workers.mjs";

const opts = optionsOrExit(
  process.argv.slice(2),
  {
    seconds: { default: 20, min: 1, max: 600 },
    port: { default: 8811, min: 1 },
    concurrency: { default: 2, min: 1, max: 64 },
    "max-per-key": { default: 5000, min: 1, max: 1_000_000 },
  },
  `Usage: npm run soak -- [--seconds 20] [--port 8811] [--concurrency 2] [--max-per-key 5000]
  --seconds      traffic for this long (1–600)
  --port         the API's port (its inspector: port + 2)
  --concurrency  requests in flight per key
  --max-per-key  requests per key at most`,
);
const BAN_MINUTES = 15;
const MINUTE = 60_000;
const DAY = 86_400_000;
const STATUSES = ["available", "pending", "sold"];
const started = Date.now();
const log = (msg) =>
  console.log(`[soak ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}`);

const KEY_SPECS = [
  { name: "free-polite", plan: "free", polite: true },
  { name: "free-aggressive", plan: "free", polite: false },
  { name: "pro-polite", plan: "pro", polite: true },
  { name: "pro-aggressive", plan: "pro", polite: false },
  { name: "business-polite", plan: "business", polite: true },
  { name: "business-aggressive", plan: "business", polite: false },
  {
    name: "enterprise-20m-50d-polite",
    plan: "enterprise",
    limits: { perMinute: 20, perDay: 50 },
    polite: true,
  },
  {
    name: "enterprise-20m-50d-aggressive",
    plan: "enterprise",
    limits: { perMinute: 20, perDay: 50 },
    polite: false,
  },
  {
    name: "enterprise-5m-1000d-aggressive",
    plan: "enterprise",
    limits: { perMinute: 5, perDay: 1000 },
    polite: false,
  },
];

const isPet = (p) =>
  p &&
  Number.isSafeInteger(p.id) &&
  p.id >= 1 &&
  typeof p.name === "string" &&
  Number.isSafeInteger(p.categoryId) &&
  STATUSES.includes(p.status);
const isError = (b, status) =>
  b && typeof b.code === "string" && typeof b.message === "string" && b.status === status;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * @typedef {{ method: string, path: string, send: number, recv: number, status: number,
 *   rateLimit: string | null, retryAfter: string | null, body: any, error: string | null,
 *   mismatch?: string }} SentRecord
 */

/**
 * @param {{ url: string }} api
 * @param {string} key
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<SentRecord>}
 */
async function send(api, key, method, path, body) {
  /** @type {SentRecord} */
  const rec = {
    method,
    path,
    send: Date.now(),
    recv: 0,
    status: 0,
    rateLimit: null,
    retryAfter: null,
    body: null,
    error: null,
  };
  try {
    const res = await fetch(api.url + path, {
      method,
      headers: {
        Authorization: `Bearer ${key}`,
        ...(body ? { "Content-Type": "application/json" } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    rec.recv = Date.now();
    rec.status = res.status;
    rec.rateLimit = res.headers.get("RateLimit");
    rec.retryAfter = res.headers.get("Retry-After");
    try {
      rec.body = JSON.parse(text);
    } catch {
      rec.body = text;
    }
  } catch (err) {
    rec.recv = Date.now();
    rec.error = String(err);
  }
  return rec;
}

/** Checks the documented shape of a response body; returns a problem or null. */
function shapeProblem(r) {
  if (r.status >= 200 && r.status < 300) {
    if (r.path.startsWith("/v1/pets?")) {
      if (!Array.isArray(r.body) || !r.body.every(isPet))
        return "list body is not an array of pets";
      const status = new URLSearchParams(r.path.split("?")[1]).get("status");
      if (status && !r.body.every((p) => p.status === status))
        return `filtered list contains another status than ${status}`;
      const ids = r.body.map((p) => p.id);
      if (ids.some((id, i) => i > 0 && id <= ids[i - 1]))
        return "list is not in ascending id order";
    } else if (!isPet(r.body)) return "body is not a pet";
    return null;
  }
  return isError(r.body, r.status)
    ? null
    : `error body is not an Error: ${JSON.stringify(r.body).slice(0, 200)}`;
}

/** The minute window (its start, epoch ms) in which the limiter decided this request; null if unknown. */
function minuteOf(r) {
  const m = r.rateLimit?.match(/"minute";r=\d+;t=(\d+)/);
  if (m) {
    // t = ceil((resetAt − now) / 1000) with now in [send, recv]: resetAt ∈ (send + (t−1)·1000, recv + t·1000].
    const t = Number(m[1]);
    const lo = r.send + (t - 1) * 1000 - 50;
    const hi = r.recv + t * 1000 + 50;
    const reset = Math.floor(hi / MINUTE) * MINUTE;
    if (reset > lo && reset - MINUTE <= lo) return reset - MINUTE;
  }
  const a = Math.floor(r.send / MINUTE);
  return a === Math.floor(r.recv / MINUTE) ? a * MINUTE : null;
}

async function keyTraffic(api, k, deadline, knownIds, created) {
  const records = [];
  async function worker() {
    while (Date.now() < deadline && records.length < opts.maxPerKey) {
      const roll = Math.random();
      let rec;
      if (roll < 0.3) rec = await send(api, k.key, "GET", "/v1/pets?limit=20");
      else if (roll < 0.55)
        rec = await send(
          api,
          k.key,
          "GET",
          `/v1/pets?status=${STATUSES[Math.floor(Math.random() * 3)]}&limit=${1 + Math.floor(Math.random() * 50)}`,
        );
      else if (roll < 0.8) {
        const pet = {
          name: `soak-${k.spec.name}-${records.length}`,
          categoryId: 1 + Math.floor(Math.random() * 9),
          status: STATUSES[Math.floor(Math.random() * 3)],
        };
        rec = await send(api, k.key, "POST", "/v1/pets", pet);
        if (rec.status === 201) {
          if (
            rec.body?.name !== pet.name ||
            rec.body?.categoryId !== pet.categoryId ||
            rec.body?.status !== pet.status
          )
            rec.mismatch = "created pet differs from the request";
          created.push(rec.body);
          knownIds.push(rec.body.id);
        }
      } else
        rec = await send(
          api,
          k.key,
          "GET",
          `/v1/pets/${knownIds[Math.floor(Math.random() * knownIds.length)]}`,
        );
      records.push(rec);
      if (rec.status === 429 && k.spec.polite) {
        const wait = Math.max(1, Number(rec.retryAfter) || 1) * 1000;
        await sleep(Math.min(wait, Math.max(0, deadline - Date.now())));
      }
    }
  }
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return records;
}

/** The model above, over requests already placed in minute windows. */
function model(limits, placed) {
  const windows = new Map();
  for (const { w, admitted } of placed) {
    const entry = windows.get(w) ?? { sent: 0, admitted: 0 };
    entry.sent++;
    if (admitted) entry.admitted++;
    windows.set(w, entry);
  }
  const rows = [];
  const mismatches = [];
  const dayAdmitted = new Map();
  let banned = false;
  for (const [w, { sent, admitted }] of [...windows].sort((a, b) => a[0] - b[0])) {
    const day = w - (w % DAY);
    const before = dayAdmitted.get(day) ?? 0;
    const expected = banned
      ? 0
      : Math.min(sent, limits.perMinute, Math.max(0, limits.perDay - before));
    if (!banned && sent - expected > Math.max(10, limits.perMinute)) banned = true;
    dayAdmitted.set(day, before + admitted);
    rows.push({ window: new Date(w).toISOString().slice(11, 16), sent, admitted, expected });
    if (admitted !== expected)
      mismatches.push(
        `window ${new Date(w).toISOString()}: admitted ${admitted}, expected ${expected} (sent ${sent})`,
      );
  }
  return { rows, mismatches, banned, days: dayAdmitted };
}

/**
 * Places each response in its minute window and applies the model. A 429 key_banned response
 * carries the ban's reset rather than the minute's, so one sent across a minute boundary cannot
 * be placed from its headers; it is a refusal either way, and the check passes if the counts are
 * exact for some placement of those few (at most 12) responses on either side of the boundary.
 */
function checkQuota(k, records) {
  // The limits the admin API gave the key when it was issued: its plan's (src/quota/plans.ts), or
  // an enterprise key's own.
  const limits = k.limits;
  const problems = [];
  const placed = [];
  const open = [];
  for (const r of records) {
    if (r.error || r.status === 401) continue;
    const w = minuteOf(r);
    if (w !== null) placed.push({ w, admitted: r.status !== 429 });
    else if (r.status === 429 && r.body?.code === "key_banned")
      open.push([Math.floor(r.send / MINUTE) * MINUTE, Math.floor(r.recv / MINUTE) * MINUTE]);
    else problems.push(`a ${r.status} response could not be placed in a minute window`);
  }
  if (open.length > 12)
    problems.push(
      `${open.length} banned responses straddle a minute boundary; too many placements to try`,
    );
  /** @type {ReturnType<typeof model> | null} */
  let result = null;
  const tries = open.length > 12 ? 1 : 2 ** open.length;
  for (let mask = 0; mask < tries; mask++) {
    const attempt = model(limits, [
      ...placed,
      ...open.map(([a, b], i) => ({ w: mask & (1 << i) ? b : a, admitted: false })),
    ]);
    if (!result || attempt.mismatches.length === 0) result = attempt;
    if (attempt.mismatches.length === 0) break;
  }
  if (!result) throw new Error("no placement of the banned responses was tried");
  problems.push(...result.mismatches);
  const admitted = result.rows.reduce((s, r) => s + r.admitted, 0);
  const expected = result.rows.reduce((s, r) => s + r.expected, 0);
  return {
    limits,
    rows: result.rows,
    problems,
    admitted,
    expected,
    banned: result.banned,
    days: result.days,
    straddling: open.length,
  };
}

async function main() {
  log(`starting the API on port ${opts.port}`);
  const api = (server = await startApi({
    port: opts.port,
    inspectorPort: opts.port + 2,
    vars: { BAN_MINUTES: String(BAN_MINUTES) },
  }));
  const seedKey = await issueKey(api, { name: "soak-seed", plan: "enterprise", limits: UNLIMITED });
  const seeded = await seedPets(api, seedKey.key, 30, { prefix: "soak-seed" });
  const keys = [];
  for (const spec of KEY_SPECS)
    keys.push({
      spec,
      ...(await issueKey(api, { name: `soak-${spec.name}`, plan: spec.plan, limits: spec.limits })),
    });
  log(
    `issued ${keys.length} keys (${[...new Set(KEY_SPECS.map((s) => s.plan))].join(", ")}), seeded ${seeded.length} pets; traffic for ${opts.seconds} s, ${opts.concurrency} requests in flight per key`,
  );

  const knownIds = seeded.map((p) => p.id);
  const created = [...seeded];
  const deadline = Date.now() + opts.seconds * 1000;
  const perKey = await Promise.all(
    keys.map((k) => keyTraffic(api, k, deadline, knownIds, created)),
  );
  const trafficSeconds = (Date.now() - deadline + opts.seconds * 1000) / 1000;
  const all = perKey.flat();
  log(
    `traffic done: ${all.length} requests in ${trafficSeconds.toFixed(1)} s (${(all.length / trafficSeconds).toFixed(0)} req/s)`,
  );

  const failures = [];
  const byStatus = {};
  for (const r of all)
    byStatus[r.error ? "network error" : r.status] =
      (byStatus[r.error ? "network error" : r.status] ?? 0) + 1;
  const fivexx = all.filter((r) => r.status >= 500).length;
  const netErrors = all.filter((r) => r.error);
  const unauthorized = all.filter((r) => r.status === 401).length;
  if (fivexx) failures.push(`${fivexx} × 5xx`);
  if (netErrors.length)
    failures.push(`${netErrors.length} network errors (first: ${netErrors[0].error})`);
  if (unauthorized) failures.push(`${unauthorized} × 401 for valid keys`);
  const shapes = all.map((r) => (r.error ? null : (r.mismatch ?? shapeProblem(r)))).filter(Boolean);
  if (shapes.length)
    failures.push(`${shapes.length} bodies with the wrong shape (first: ${shapes[0]})`);

  // Checks 1 and 2, per key.
  const admin = { Authorization: `Bearer ${api.adminToken}` };
  const keyRows = [];
  for (const [i, k] of keys.entries()) {
    const q = checkQuota(k, perKey[i]);
    const response = await fetch(`${api.url}/admin/v1/keys/${k.id}`, { headers: admin });
    const detail = /** @type {{ usage?: { day?: { count: number } } }} */ (await response.json());
    const doDay = detail?.usage?.day?.count;
    const clientToday = q.days.get(Date.now() - (Date.now() % DAY)) ?? 0;
    if (doDay !== clientToday)
      q.problems.push(
        `its quota object counted ${doDay} today, the client saw ${clientToday} admitted`,
      );
    for (const p of q.problems) failures.push(`${k.spec.name}: ${p}`);
    const statuses = {};
    for (const r of perKey[i])
      statuses[r.error ? "err" : r.status] = (statuses[r.error ? "err" : r.status] ?? 0) + 1;
    keyRows.push({ k, q, doDay, statuses, sent: perKey[i].length });
  }

  // Check 5: read back every pet created (and seeded), with a fresh key.
  const reader = await issueKey(api, {
    name: "soak-reader",
    plan: "enterprise",
    limits: UNLIMITED,
  });
  let readOk = 0;
  const readProblems = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < created.length) {
        const pet = created[next++];
        const r = await send(api, reader.key, "GET", `/v1/pets/${pet.id}`);
        if (r.status === 200 && JSON.stringify(r.body) === JSON.stringify(pet)) readOk++;
        else
          readProblems.push(`pet ${pet.id}: ${r.status} ${JSON.stringify(r.body).slice(0, 120)}`);
      }
    }),
  );
  const distinct = new Set(created.map((p) => p.id)).size;
  if (distinct !== created.length)
    failures.push(`created ids are not distinct: ${created.length} pets, ${distinct} ids`);
  if (readProblems.length)
    failures.push(
      `${readProblems.length} created pets did not read back (first: ${readProblems[0]})`,
    );

  // Report.
  console.log(
    `\nTotals by status (${all.length} requests, ${trafficSeconds.toFixed(1)} s, ${keys.length} keys × ${opts.concurrency} in flight):`,
  );
  for (const [s, c] of Object.entries(byStatus).sort())
    console.log(`  ${String(s).padEnd(14)} ${c}`);
  console.log(
    "\nPer key (admitted = responses other than 429/401; expected from the model in the header of this script):",
  );
  console.log(
    `  ${"key".padEnd(32)} ${"limits".padEnd(14)} ${"sent".padStart(6)} ${"admitted".padStart(9)} ${"expected".padStart(9)} ${"DO day".padStart(7)}  ${"banned".padEnd(6)} statuses / windows`,
  );
  for (const { k, q, doDay, statuses, sent } of keyRows) {
    const st = Object.entries(statuses)
      .map(([s, c]) => `${s}×${c}`)
      .join(" ");
    const win = q.rows.map((r) => `${r.window}: ${r.admitted}/${r.sent}`).join(", ");
    console.log(
      `  ${k.spec.name.padEnd(32)} ${`${q.limits.perMinute}/m ${q.limits.perDay}/d`.padEnd(14)} ${String(sent).padStart(6)} ${String(q.admitted).padStart(9)} ${String(q.expected).padStart(9)} ${String(doDay).padStart(7)}  ${String(q.banned).padEnd(6)} ${st}  [${win}]`,
    );
  }
  console.log(
    `\nCreated ${created.length - seeded.length} pets (+${seeded.length} seeded); ${readOk}/${created.length} read back unchanged with a fresh key.`,
  );
  const checks = [
    [
      "admitted count per key equals its quota (exact, per window)",
      !failures.some((f) => /: (window|a \d+ response|\d+ banned responses)/.test(f)),
    ],
    [
      "quota objects counted what the client saw admitted",
      !failures.some((f) => f.includes("quota object counted")),
    ],
    ["0 × 5xx, 0 network errors, 0 × 401", !fivexx && !netErrors.length && !unauthorized],
    ["every body has the documented shape", !shapes.length],
    ["every created pet reads back unchanged", !readProblems.length && distinct === created.length],
  ];
  console.log("");
  for (const [name, ok] of checks) console.log(`  ${ok ? "PASS" : "FAIL"}  ${name}`);
  if (failures.length) {
    console.log("\nFailures:");
    for (const f of failures.slice(0, 40)) console.log(`  - ${f}`);
  }
  if (fivexx || netErrors.length)
    console.log(`\n--- last lines of the server's output ---\n${api.tail()}`);
  await api.stop();
  return failures.length === 0;
}

let server = null;
const hardStop = setTimeout(
  () => {
    console.error("soak: hard time limit reached; stopping");
    cleanupNow();
    process.exit(2);
  },
  (opts.seconds + 180) * 1000,
);
hardStop.unref();

main()
  .then((ok) => {
    cleanupNow();
    process.exit(ok ? 0 : 1);
  })
  .catch((err) => {
    console.error(`soak failed: ${err.stack ?? err}`);
    if (server)
      console.error(`\n--- last lines of ${server.url} (${server.logFile}) ---\n${server.tail()}`);
    cleanupNow();
    process.exit(1);
  });
