#!/usr/bin/env node
// @ts-check
// `npm run bench:quota -- --limiter-rtt 100 --d1-rtt 30 --local-rtt 5`: where a key's requests are
// decided, measured one request at a time on the bench entry Worker (bench/api/index.ts) behind the
// simulated network. Each API request (GET /v1/pets?limit=20, a full, warm page) is followed by a
// reference request to the same server (GET /v1/openapi.json: no key, no quota, no hop), and the
// report gives both medians and p99s. Requests carry X-Bench-Location, so one server plays several
// locations, each with its own location holders (objects/quota-holder.ts).
//
// Scenarios: quiet (a free key, one request every --gap-ms in one location), cold (the first request
// of fresh keys), 3 locations (a free key, one request every --gap-ms in each of three locations at
// once), near the limit (a key allowing 20 a minute, one request every 0.5 s), busy (one key, back
// to back). Per 1,000 requests: far calls waited for (the Worker's calls to the key's object its
// request waited for, plus requests the location holder forwarded), far calls a request started in
// the background (its lease's renewals), local calls (to the location holder), and Durable Object
// requests of any kind (GET /__bench/calls before and after: the Worker's and the holders', the
// holders' background renewals included). Informs, never gates.
//
// One server playing several locations is one isolate: the isolate's own lease per key sees the
// traffic of all of them (in production an isolate serves one location), so the 3-location
// scenario keeps the key's total rate below the 2 a second at which an isolate takes a lease.

import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { cleanupNow, issueKey, ROOT, snapshotProject } from "../scripts/lib/local-server.mjs";
import { optionsOrExit } from "./lib/options.mjs";
import { percentile } from "./lib/samples.mjs";
import { seedPets, startBenchApi, UNLIMITED } from "./lib/workers.mjs";

const USAGE = `Usage: npm run bench:quota -- [options]
  --limiter-rtt 100   simulated round trip of each call to a key's QuotaLimiter, in ms
  --d1-rtt 30         simulated round trip of each D1 query, in ms
  --local-rtt 5       simulated round trip of each call to a key's location holder, in ms
  --gap-ms 1500       a quiet key's time between requests, in ms
  --quiet 30          quiet requests (after the key's first)
  --cold 15           fresh keys, one first request each
  --located 15        requests per location in the 3-location scenario
  --located-gap-ms 3300  time between a location's requests there (all three together stay
                      below 2 a second: one server is one isolate, see below)
  --busy 300          back-to-back requests of the busy key
  --scenarios quiet,cold,cold-isolate,3-locations,near-limit,busy
                      the scenarios to run, comma-separated (default: all)
  --port 8860         the API's port (its inspector: port + 2)
  --out quota         bench/results/<out>.md`;

const SCENARIOS = ["quiet", "cold", "cold-isolate", "3-locations", "near-limit", "busy"];

const opts = optionsOrExit(
  process.argv.slice(2),
  {
    "limiter-rtt": { default: 100, max: 10_000 },
    "d1-rtt": { default: 30, max: 10_000 },
    "local-rtt": { default: 5, max: 10_000 },
    "gap-ms": { default: 1_500, max: 60_000 },
    quiet: { default: 30, min: 1 },
    cold: { default: 15, min: 1 },
    located: { default: 15, min: 1 },
    "located-gap-ms": { default: 3_300, max: 60_000 },
    busy: { default: 300, min: 1 },
    scenarios: {
      default: SCENARIOS.join(","),
      pattern: new RegExp(`^(${SCENARIOS.join("|")})(,(${SCENARIOS.join("|")}))*$`),
    },
    port: { default: 8860, min: 1 },
    out: { default: "quota", pattern: /^[a-z0-9][a-z0-9-]{0,60}$/ },
  },
  USAGE,
);

const chosen = new Set(opts.scenarios.split(","));
/** Whether scenario `name` was asked for (--scenarios). */
const runs = (name) => chosen.has(name);

const started = Date.now();
const log = (msg) =>
  console.log(`[bench:quota ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const PAGE = "/v1/pets?limit=20";

/** @type {{ stop: () => Promise<unknown>, url: string, tail: () => string, logFile: string } | null} */
let server = null;

/** One timed request; its status, time and X-Bench-Calls. */
async function timed(url, headers) {
  const t0 = performance.now();
  const res = await fetch(url, { headers });
  await res.arrayBuffer();
  return {
    ms: performance.now() - t0,
    status: res.status,
    calls: res.headers.get("x-bench-calls"),
  };
}

/**
 * The API request, then the reference request right after it. `coldIsolate`: the API request is
 * served as by an isolate that has never seen the key (X-Bench-Cold-Isolate, bench/api/index.ts).
 */
async function pair(api, key, location, { coldIsolate = false } = {}) {
  const got = await timed(`${api.url}${PAGE}`, {
    Authorization: `Bearer ${key}`,
    "X-Bench-Location": location,
    ...(coldIsolate ? { "X-Bench-Cold-Isolate": "1" } : {}),
  });
  const ref = await timed(`${api.url}/v1/openapi.json`, {});
  return { ...got, refMs: ref.ms };
}

async function callTotals(api) {
  const res = await fetch(`${api.url}/__bench/calls`);
  return /** @type {Record<string, number>} */ (await res.json());
}

/**
 * Far calls waited for, far calls started in the background (not waited for), local calls, per
 * 1,000 requests, from the samples' X-Bench-Calls.
 */
function callsOf(samples) {
  let far = 0;
  let background = 0;
  let local = 0;
  for (const s of samples) {
    const m = s.calls?.match(/limiter=(\d+), .*local=(\d+), forwarded=(\d+), background=(\d+)/);
    if (!m) throw new Error(`a response without X-Bench-Calls: ${s.calls}`);
    far += Number(m[1]) - Number(m[4]) + Number(m[3]);
    background += Number(m[4]);
    local += Number(m[2]);
  }
  const perThousand = (n) => (1000 * n) / samples.length;
  return { far: perThousand(far), background: perThousand(background), local: perThousand(local) };
}

const p = (values, q) => percentile(Float64Array.from(values).sort(), q);

function summary(name, samples, before, after, objectsPerKey, note = "") {
  const doRequests = ["limiter", "relayed", "local"].reduce(
    (n, hop) => n + (after[hop] ?? 0) - (before[hop] ?? 0),
    0,
  );
  const api = samples.map((s) => s.ms);
  const ref = samples.map((s) => s.refMs);
  const statuses = {};
  for (const s of samples) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
  return {
    name,
    n: samples.length,
    p50: p(api, 0.5),
    p99: p(api, 0.99),
    refP50: p(ref, 0.5),
    refP99: p(ref, 0.99),
    ...callsOf(samples),
    doPerThousand: (1000 * doRequests) / samples.length,
    objectsPerKey,
    statuses,
    note,
  };
}

/** Runs `scenario` between two readings of the call totals. */
async function measured(api, scenario) {
  const before = await callTotals(api);
  const samples = await scenario();
  // Background work the last requests started (renewals, hand-backs) lands within a lease's life.
  await sleep(500);
  return { samples, before, after: await callTotals(api) };
}

async function main() {
  const network = { limiterRtt: opts.limiterRtt, d1Rtt: opts.d1Rtt, localRtt: opts.localRtt };
  log(`starting the bench API on port ${opts.port} (${JSON.stringify(network)})`);
  const api = await startBenchApi({
    root: snapshotProject({ extra: ["bench/api"] }),
    port: opts.port,
    inspectorPort: opts.port + 2,
    network,
    vars: { ACCESS_LOG: "off" },
    localObservability: false,
  });
  server = api;
  const seeder = await issueKey(api, { name: "seeder", plan: "enterprise", limits: UNLIMITED });
  await seedPets(api, seeder.key, 25, { prefix: "quota" });
  for (let i = 0; i < 3; i++) await pair(api, seeder.key, "AMS"); // the page is full and cached
  const rows = [];

  if (runs("quiet")) {
    log(`quiet: a free key, ${opts.quiet} requests ${opts.gapMs} ms apart in one location`);
    const quietKey = await issueKey(api, { name: "quiet", plan: "free" });
    await pair(api, quietKey.key, "AMS"); // its first request (see cold)
    await sleep(opts.gapMs);
    {
      const { samples, before, after } = await measured(api, async () => {
        const out = [];
        for (let i = 0; i < opts.quiet; i++) {
          const t0 = Date.now();
          out.push(await pair(api, quietKey.key, "AMS"));
          await sleep(Math.max(0, opts.gapMs - (Date.now() - t0)));
        }
        return out;
      });
      rows.push(summary("quiet", samples, before, after, 2));
    }
  }

  if (runs("cold")) {
    log(`cold: the first request of ${opts.cold} fresh free keys`);
    const keys = [];
    for (let i = 0; i < opts.cold; i++)
      keys.push(await issueKey(api, { name: `cold-${i}`, plan: "free" }));
    const { samples, before, after } = await measured(api, async () => {
      const out = [];
      for (const k of keys) out.push(await pair(api, k.key, "AMS"));
      return out;
    });
    rows.push(
      summary(
        "cold",
        samples,
        before,
        after,
        2,
        "a key never used anywhere: its holder reads it from D1, then forwards",
      ),
    );
  }

  if (runs("cold-isolate")) {
    log(
      `cold isolate: the first request in an isolate of ${opts.cold} free keys used in its location`,
    );
    const keys = [];
    for (let i = 0; i < opts.cold; i++)
      keys.push(await issueKey(api, { name: `cold-isolate-${i}`, plan: "free" }));
    // Each used once in AMS (by another isolate, as it were), all at once, so that every key's
    // measured request comes --gap-ms after its use, well within its holder's stock lifetime.
    await Promise.all(keys.map((k) => pair(api, k.key, "AMS")));
    await sleep(opts.gapMs);
    const { samples, before, after } = await measured(api, async () => {
      const out = [];
      for (const k of keys) out.push(await pair(api, k.key, "AMS", { coldIsolate: true }));
      return out;
    });
    rows.push(
      summary(
        "cold isolate",
        samples,
        before,
        after,
        2,
        `the key used in this location ${opts.gapMs / 1000} s before, new to the isolate: its holder authenticates and decides`,
      ),
    );
  }

  if (runs("3-locations")) {
    log(`3 locations: a free key, ${opts.located} requests ${opts.locatedGapMs} ms apart in each`);
    const key = await issueKey(api, { name: "located", plan: "free" });
    const locations = ["AMS", "FRA", "SIN"];
    // Spaced like the scenario: a burst here would make the one isolate take a lease of its own.
    for (const location of locations) {
      await pair(api, key.key, location);
      await sleep(opts.locatedGapMs / locations.length);
    }
    const { samples, before, after } = await measured(api, async () => {
      const loops = locations.map(async (location, i) => {
        await sleep((i * opts.locatedGapMs) / locations.length);
        const out = [];
        for (let n = 0; n < opts.located; n++) {
          const t0 = Date.now();
          out.push(await pair(api, key.key, location));
          await sleep(Math.max(0, opts.locatedGapMs - (Date.now() - t0)));
        }
        return out;
      });
      return (await Promise.all(loops)).flat();
    });
    rows.push(summary("3 locations", samples, before, after, 4));
  }

  if (runs("near-limit")) {
    log("near the limit: a key allowing 20 a minute, 30 requests 0.5 s apart");
    // All 30 within one minute window, so exactly 20 are admitted.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await sleep(60_000 - intoMinute + 500);
    const key = await issueKey(api, {
      name: "near-limit",
      plan: "enterprise",
      limits: { perMinute: 20, perDay: 10_000 },
    });
    const { samples, before, after } = await measured(api, async () => {
      const out = [];
      for (let i = 0; i < 30; i++) {
        const t0 = Date.now();
        out.push(await pair(api, key.key, "AMS"));
        await sleep(Math.max(0, 500 - (Date.now() - t0)));
      }
      return out;
    });
    const row = summary("near the limit", samples, before, after, 2);
    row.note = `admitted ${row.statuses[200] ?? 0} of 30 (limit 20), refused ${row.statuses[429] ?? 0}`;
    rows.push(row);
  }

  if (runs("busy")) {
    log(`busy: ${opts.busy} requests back to back`);
    const key = await issueKey(api, { name: "busy", plan: "enterprise", limits: UNLIMITED });
    for (let i = 0; i < 20; i++) await pair(api, key.key, "AMS");
    const { samples, before, after } = await measured(api, async () => {
      const out = [];
      for (let i = 0; i < opts.busy; i++) out.push(await pair(api, key.key, "AMS"));
      return out;
    });
    rows.push(summary("busy", samples, before, after, 2));
  }

  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : "–");
  const lines = [
    `# Where quota decisions are made (npm run bench:quota)`,
    "",
    `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${os.cpus().length} cores, ` +
      `load ${os.loadavg()[0].toFixed(1)}; simulated round trips: key's object ` +
      `${opts.limiterRtt} ms, D1 ${opts.d1Rtt} ms, location holder ${opts.localRtt} ms. ` +
      `API: GET ${PAGE} (a full, warm page); reference: GET /v1/openapi.json on the same server, ` +
      "right after each API request.",
    "",
    "| scenario | n | p50 | ref p50 | p50 − ref | p99 | ref p99 | far calls waited / 1,000 | far calls in background / 1,000 | local calls / 1,000 | DO requests / 1,000 | objects per key | note |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.n} | ${f(r.p50)} | ${f(r.refP50)} | ${f(r.p50 - r.refP50)} | ${f(r.p99)} | ${f(r.refP99)} | ` +
        `${f(r.far)} | ${f(r.background)} | ${f(r.local)} | ${f(r.doPerThousand)} | ${r.objectsPerKey} | ${r.note} |`,
    ),
    "",
    "Times in ms. Far calls waited for: the Worker's calls to the key's object that its request " +
      "waited for (answered before the response was ready) plus requests the location holder " +
      "forwarded. Far calls in background: the Worker's calls to the key's object a request " +
      "started and did not wait for (its own lease's renewals, still on their way when the " +
      "response was ready). DO requests: every call to a QuotaLimiter or QuotaHolder during the scenario, " +
      "from the Worker or from a holder (background renewals and refills included). Objects per " +
      "key: the key's QuotaLimiter and one QuotaHolder per location it was used in.",
    "",
  ];
  const md = lines.join("\n");
  const outDir = path.join(ROOT, "bench/results");
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, `${opts.out}.md`), md);
  console.log(`\n${md}`);
  await api.stop();
}

main()
  .then(() => {
    cleanupNow();
    process.exit(0);
  })
  .catch(async (err) => {
    console.error(`bench:quota failed: ${err.stack ?? err}`);
    if (server)
      console.error(`\n--- last lines of ${server.url} (${server.logFile}) ---\n${server.tail()}`);
    await server?.stop().catch(() => undefined);
    cleanupNow();
    process.exit(1);
  });
