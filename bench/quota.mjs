#!/usr/bin/env node
// @ts-check
// `npm run bench:quota -- --limiter-rtt 100 --d1-rtt 30 --local-rtt 5`: where a key's requests are
// decided, measured one request at a time on the bench entry Worker (bench/api/index.ts) behind the
// simulated network. Each API request (GET /v1/pets?limit=20, a full, warm page) is followed by a
// reference request to the same server (GET /v1/openapi.json: no key, no quota, no hop), and the
// report gives both medians and p99s. Requests carry X-Bench-Location, so one server plays several
// locations, each with its own location holders (objects/quota-holder.ts).
//
// Scenarios: quiet (a free key, one request every --gap-ms in one location), sparse (free keys calling
// every 10 s, 60 s and 5 minutes in one location, many keys at once, staggered), a new location (a
// key's first request in a location while it is in use in another, and its next one there), cold
// (the first request of fresh keys), cold isolate, 3 locations (a free key, one request every
// --located-gap-ms in each of three locations at once), near the limit (a key allowing 20 a
// minute, one request every 0.5 s),
// busy (one key, back to back). Requests are sent one at a time, each scenario's in time order
// (a request due while another is on its way waits for it). Per 1,000 requests: far calls waited
// for (the Worker's calls to the key's object its request waited for, plus requests the location
// holder forwarded), far calls a request started in the background (its lease's renewals), local
// calls (to the location holder), and the key's Durable Object requests of any kind while it was
// calling (GET /__bench/key-calls: the Worker's, the holders' and the key's object's, background
// renewals, pushes and alarms included). And after each key's last request: the Durable Object
// requests it still caused, and how long after that request the last one came. Informs, never
// gates.
//
// One server playing several locations is one isolate: the isolate's own lease per key sees the
// traffic of all of them (in production an isolate serves one location), so the 3-location
// scenario keeps the key's total rate below the 2 a second at which an isolate takes a lease.

import os from "node:os";
import { cleanupNow, issueKey, snapshotProject } from "../scripts/lib/local-server.mjs";
import { optionsOrExit } from "./lib/options.mjs";
import {
  byTime,
  callsPerThousandOf,
  keyCost,
  keysForSamples,
  nearMinuteEdge,
  STOPPED_KEY_CALLS_END_WITHIN_MS,
  STOPPED_KEY_OBJECT_CALLS,
  scenarioCost,
  secondsIntoMinute,
  sparsePlan,
  TAIL_SECONDS,
  waitedForFarCall,
} from "./lib/quota-scenarios.mjs";
import { writeResult } from "./lib/report.mjs";
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
  --slowing 60        requests of the slowing key, one every --slowing-gap-ms after its busy start
  --slowing-gap-ms 455  its time between requests, in ms (2.2 a second: still busy in its isolate)
  --sparse-gaps 10,60,300  the sparse keys' time between requests, in s (one scenario each)
  --sparse-minutes 5  how long each sparse key calls after its first request (at least one
                      measured request each)
  --sparse-samples 150  measured requests per sparse scenario: as many keys as that takes
                      (150 at 5 minutes: 150 keys, one measured request each)
  --sparse-warmup 1   each sparse key's first requests not measured (its start-up in the
                      location; 2: also the one that gets its first grant sized to its gap),
                      the --sparse-minutes of measured requests coming after them
  --new-location 15   keys, each in use in one location, sending a first request in another
                      (and as many more sending a first and a next request there)
  --tail-seconds ${TAIL_SECONDS}  how long after the last request of the quiet and sparse keys their
                      background Durable Object requests are watched before the report (a
                      stopped key's last one comes within ${STOPPED_KEY_CALLS_END_WITHIN_MS / 1000} s)
  --scenarios quiet,sparse,new-location,cold,cold-isolate,3-locations,near-limit,busy
                      the scenarios to run, comma-separated (default: all)

With the defaults the whole run takes about 15 minutes: the sparse scenarios run together for
about 6 (a minute of staggered first requests, then 5 minutes of calls), the others about 3,
and the report waits until the last sparse request is --tail-seconds old.
  --port 8860         the API's port (its inspector: port + 2)
  --out quota         bench/results/<out>.md`;

const SCENARIOS = [
  "quiet",
  "sparse",
  "new-location",
  "cold",
  "cold-isolate",
  "3-locations",
  "near-limit",
  "busy",
  "slowing",
];

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
    slowing: { default: 60, min: 1 },
    "slowing-gap-ms": { default: 455, min: 1, max: 60_000 },
    "sparse-gaps": { default: "10,60,300", pattern: /^[1-9][0-9]{0,4}(,[1-9][0-9]{0,4})*$/ },
    "sparse-minutes": { default: 5, min: 1, max: 120 },
    "sparse-warmup": { default: 1, min: 1, max: 10 },
    "sparse-samples": { default: 150, min: 1, max: 2_000 },
    "new-location": { default: 15, min: 1, max: 500 },
    "tail-seconds": { default: TAIL_SECONDS, max: 3_600 },
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

/** One timed request; its status, time, X-Bench-Calls, and when it started and ended (Date.now()). */
async function timed(url, headers) {
  const startAt = Date.now();
  const t0 = performance.now();
  const res = await fetch(url, { headers });
  await res.arrayBuffer();
  return {
    ms: performance.now() - t0,
    status: res.status,
    calls: res.headers.get("x-bench-calls"),
    startAt,
    endAt: Date.now(),
  };
}

/**
 * @typedef {{ id: string, key: string, sent: import("./lib/quota-scenarios.mjs").SentRequest[] }}
 *   Tracked  A scenario's key and its requests as sent.
 * @typedef {Awaited<ReturnType<typeof timed>> & { refMs: number }} Sample
 */

/** A key issued for a scenario, tracked: its requests are recorded as `pair` sends them. */
async function trackedKey(api, spec) {
  const issued = await issueKey(api, spec);
  return /** @type {Tracked} */ ({ id: issued.id, key: issued.key, sent: [] });
}

/** Issues `count` keys of `spec` (named `<name>-<i>`), a few at a time. */
async function trackedKeys(api, count, spec) {
  /** @type {Tracked[]} */
  const out = [];
  for (let i = 0; i < count; i += 8)
    out.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(8, count - i) }, (_, j) =>
          trackedKey(api, { ...spec, name: `${spec.name}-${i + j}` }),
        ),
      )),
    );
  return out;
}

/**
 * The API request, then the reference request right after it, recorded on `key` as measured or
 * not. `coldIsolate`: the API request is served as by an isolate that has never seen the key
 * (X-Bench-Cold-Isolate, bench/api/index.ts).
 * @param {{ url: string }} api
 * @param {Tracked | { key: string, sent?: undefined }} key
 * @param {string} location
 * @returns {Promise<Sample>}
 */
async function pair(api, key, location, { coldIsolate = false, measured = true } = {}) {
  const got = await timed(`${api.url}${PAGE}`, {
    Authorization: `Bearer ${key.key}`,
    "X-Bench-Location": location,
    ...(coldIsolate ? { "X-Bench-Cold-Isolate": "1" } : {}),
  });
  key.sent?.push({ startAt: got.startAt, endAt: got.endAt, measured });
  const ref = await timed(`${api.url}/v1/openapi.json`, {});
  return { ...got, refMs: ref.ms };
}

/**
 * Sends `plan`'s requests one at a time in time order, each when due (`at` ms after the start) or
 * as soon as the one before has its answer; `send(request)` sends one and returns its sample.
 * The measured requests' samples.
 * @template {{ at: number, measured: boolean }} R
 * @param {R[]} plan
 * @param {(request: R) => Promise<Sample>} send
 */
async function runPlan(plan, send) {
  const t0 = Date.now();
  /** @type {Sample[]} */
  const out = [];
  for (const request of plan) {
    await sleep(request.at - (Date.now() - t0));
    const sample = await send(request);
    if (request.measured) out.push(sample);
  }
  return out;
}

async function keyCalls(api) {
  const res = await fetch(`${api.url}/__bench/key-calls`);
  return /** @type {Record<string, import("./lib/quota-scenarios.mjs").KeyCall[]>} */ (
    await res.json()
  );
}

const p = (values, q) => percentile(Float64Array.from(values).sort(), q);

/**
 * A scenario's row: latencies and calls per request from its samples, and its keys' cost
 * (`scenarioCost`) once their calls are read at the end of the run.
 * @param {string} name
 * @param {Sample[]} samples
 * @param {Tracked[]} keys
 * @param {number} objectsPerKey
 */
function row(name, samples, keys, objectsPerKey, note = "", seconds = Number.NaN) {
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
    refs: ref,
    ...callsPerThousandOf(samples),
    keys,
    objectsPerKey,
    statuses,
    note,
    /** How long the measured requests took, when the report gives rates a second (busy). */
    seconds,
  };
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
  for (let i = 0; i < 3; i++) await pair(api, seeder, "AMS"); // the page is full and cached
  const rows = [];
  /** Keys whose calls after their last request the report waits --tail-seconds for. */
  const watched = [];

  if (runs("quiet")) {
    log(`quiet: a free key, ${opts.quiet} requests ${opts.gapMs} ms apart in one location`);
    const quietKey = await trackedKey(api, { name: "quiet", plan: "free" });
    await pair(api, quietKey, "AMS", { measured: false }); // its first request (see cold)
    await sleep(opts.gapMs);
    const samples = [];
    for (let i = 0; i < opts.quiet; i++) {
      const t0 = Date.now();
      samples.push(await pair(api, quietKey, "AMS"));
      await sleep(Math.max(0, opts.gapMs - (Date.now() - t0)));
    }
    rows.push(row("quiet", samples, [quietKey], 2));
    watched.push(quietKey);
  }

  if (runs("sparse")) {
    const gaps = opts.sparseGaps.split(",").map((s) => Number(s) * 1000);
    const spanMs = opts.sparseMinutes * 60_000;
    /** @type {{ gapMs: number, keys: Tracked[], plan: ReturnType<typeof sparsePlan> }[]} */
    const groups = [];
    let firstKey = 0;
    for (const gapMs of gaps) {
      const { keys, requestsPerKey } = keysForSamples({
        gapMs,
        spanMs,
        samples: opts.sparseSamples,
      });
      const plan = sparsePlan({
        gapMs,
        keys,
        requestsPerKey,
        spreadMs: Math.min(gapMs, 60_000),
        firstKey,
        warmup: opts.sparseWarmup,
      });
      firstKey += keys;
      log(`sparse every ${gapMs / 1000} s: issuing ${keys} keys × ${requestsPerKey} requests`);
      groups.push({
        gapMs,
        keys: await trackedKeys(api, keys, { name: `sparse-${gapMs / 1000}s`, plan: "free" }),
        plan,
      });
    }
    const allKeys = groups.flatMap((g) => g.keys);
    const plan = byTime(groups.flatMap((g) => g.plan.map((r) => ({ ...r, gapMs: g.gapMs }))));
    const lastAt = plan.length ? plan[plan.length - 1].at : 0;
    log(
      `sparse: ${plan.length} requests of ${allKeys.length} keys over ${(lastAt / 60_000).toFixed(1)} min`,
    );
    /** @type {Map<number, Sample[]>} */
    const byGap = new Map(gaps.map((g) => [g, []]));
    await runPlan(plan, async (r) => {
      const sample = await pair(api, allKeys[r.key], "AMS", { measured: r.measured });
      if (r.measured) byGap.get(r.gapMs)?.push(sample);
      return sample;
    });
    for (const g of groups) {
      const name = g.gapMs % 60_000 === 0 ? `${g.gapMs / 60_000} min` : `${g.gapMs / 1000} s`;
      const samples = byGap.get(g.gapMs) ?? [];
      const far = samples.filter(waitedForFarCall);
      const edge = nearMinuteEdge(samples);
      rows.push(
        row(
          `sparse, every ${name}`,
          samples,
          g.keys,
          2,
          `${g.keys.length} ${g.keys.length === 1 ? "key" : "keys"}, after each key's first ${opts.sparseWarmup === 1 ? "request" : `${opts.sparseWarmup} requests`}` +
            `; within 1 s of a minute's edge: ${edge.length}, of them far: ${edge.filter(waitedForFarCall).length}` +
            (far.length
              ? `; far calls at s into the minute: ${secondsIntoMinute(far).join(", ")}`
              : ""),
        ),
      );
      watched.push(...g.keys);
    }
  }

  if (runs("new-location")) {
    log(
      `a new location: ${opts.newLocation} keys in use in AMS, each then sent once in SIN; ` +
        `${opts.newLocation} more sent twice there`,
    );
    const keys = await trackedKeys(api, opts.newLocation, { name: "new-location", plan: "free" });
    // Keys of their own for the next request there, so the first request's row is costed alone.
    const nextKeys = await trackedKeys(api, opts.newLocation, {
      name: "new-location-next",
      plan: "free",
    });
    // Each key: three requests in AMS 1.5 s apart, then its first in SIN 1 s after the last, as a
    // SIN isolate would serve it (one that has never seen the key); a `next` key also its second
    // in SIN 1 s after that, from another new isolate. Keys start 0.6 s apart, the `next` keys
    // 0.3 s after the others, so that no two requests fall due together.
    const inAmsThenSin = (k, { next }) => {
      const t = k * 600 + (next ? 300 : 0);
      return [
        { at: t, key: k, location: "AMS", measured: false, next },
        { at: t + 1_500, key: k, location: "AMS", measured: false, next },
        { at: t + 3_000, key: k, location: "AMS", measured: false, next },
        { at: t + 4_000, key: k, location: "SIN", measured: !next, next },
        ...(next ? [{ at: t + 5_000, key: k, location: "SIN", measured: true, next }] : []),
      ];
    };
    const plan = byTime([
      ...keys.flatMap((_, k) => inAmsThenSin(k, { next: false })),
      ...nextKeys.flatMap((_, k) => inAmsThenSin(k, { next: true })),
    ]);
    /** @type {Sample[]} */
    const firsts = [];
    /** @type {Sample[]} */
    const nexts = [];
    await runPlan(plan, async (r) => {
      const sample = await pair(api, (r.next ? nextKeys : keys)[r.key], r.location, {
        coldIsolate: r.location === "SIN",
        measured: r.measured,
      });
      if (r.measured) (r.next ? nexts : firsts).push(sample);
      return sample;
    });
    rows.push(
      row(
        "new location",
        firsts,
        keys,
        3,
        "the key's first request in SIN, 1 s after its last in AMS (where it holds stock), from an isolate new to it",
      ),
      row(
        "new location, next request",
        nexts,
        nextKeys,
        3,
        "the key's second request in SIN, 1 s after its first there, from another isolate new to it",
      ),
    );
  }

  if (runs("cold")) {
    log(`cold: the first request of ${opts.cold} fresh free keys`);
    const keys = await trackedKeys(api, opts.cold, { name: "cold", plan: "free" });
    const samples = [];
    for (const k of keys) samples.push(await pair(api, k, "AMS"));
    rows.push(
      row(
        "cold",
        samples,
        keys,
        2,
        "a key never used anywhere: its holder reads it from D1, then forwards",
      ),
    );
  }

  if (runs("cold-isolate")) {
    log(
      `cold isolate: the first request in an isolate of ${opts.cold} free keys used in its location`,
    );
    const keys = await trackedKeys(api, opts.cold, { name: "cold-isolate", plan: "free" });
    // Each used once in AMS (by another isolate, as it were), all at once, so that every key's
    // measured request comes --gap-ms after its use, well within its holder's stock lifetime.
    await Promise.all(keys.map((k) => pair(api, k, "AMS", { measured: false })));
    await sleep(opts.gapMs);
    const samples = [];
    for (const k of keys) samples.push(await pair(api, k, "AMS", { coldIsolate: true }));
    rows.push(
      row(
        "cold isolate",
        samples,
        keys,
        2,
        `the key used in this location ${opts.gapMs / 1000} s before, new to the isolate: its holder authenticates and decides`,
      ),
    );
  }

  if (runs("3-locations")) {
    log(`3 locations: a free key, ${opts.located} requests ${opts.locatedGapMs} ms apart in each`);
    const key = await trackedKey(api, { name: "located", plan: "free" });
    const locations = ["AMS", "FRA", "SIN"];
    // Spaced like the scenario: a burst here would make the one isolate take a lease of its own.
    for (const location of locations) {
      await pair(api, key, location, { measured: false });
      await sleep(opts.locatedGapMs / locations.length);
    }
    const loops = locations.map(async (location, i) => {
      await sleep((i * opts.locatedGapMs) / locations.length);
      const out = [];
      for (let n = 0; n < opts.located; n++) {
        const t0 = Date.now();
        out.push(await pair(api, key, location));
        await sleep(Math.max(0, opts.locatedGapMs - (Date.now() - t0)));
      }
      return out;
    });
    const samples = (await Promise.all(loops)).flat();
    key.sent.sort((a, b) => a.startAt - b.startAt);
    rows.push(row("3 locations", samples, [key], 4));
  }

  if (runs("near-limit")) {
    log("near the limit: a key allowing 20 a minute, 30 requests 0.5 s apart");
    // All 30 within one minute window, so exactly 20 are admitted.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await sleep(60_000 - intoMinute + 500);
    const key = await trackedKey(api, {
      name: "near-limit",
      plan: "enterprise",
      limits: { perMinute: 20, perDay: 10_000 },
    });
    const samples = [];
    for (let i = 0; i < 30; i++) {
      const t0 = Date.now();
      samples.push(await pair(api, key, "AMS"));
      await sleep(Math.max(0, 500 - (Date.now() - t0)));
    }
    const r = row("near the limit", samples, [key], 2);
    r.note = `admitted ${r.statuses[200] ?? 0} of 30 (limit 20), refused ${r.statuses[429] ?? 0}`;
    rows.push(r);
  }

  if (runs("busy")) {
    log(`busy: ${opts.busy} requests back to back`);
    const key = await trackedKey(api, { name: "busy", plan: "enterprise", limits: UNLIMITED });
    for (let i = 0; i < 20; i++) await pair(api, key, "AMS", { measured: false });
    const samples = [];
    const t0 = Date.now();
    for (let i = 0; i < opts.busy; i++) samples.push(await pair(api, key, "AMS"));
    // A busy key's object calls are its isolate's lease renewals, a few a second whatever its
    // rate: per 1,000 requests they follow the rate this one-at-a-time client reaches, so the
    // report gives both rates a second too.
    rows.push(row("busy", samples, [key], 2, "", (Date.now() - t0) / 1000));
  }

  if (runs("slowing")) {
    log(
      `slowing: a key sent back to back, then ${opts.slowing} requests ${opts.slowingGapMs} ms apart`,
    );
    const key = await trackedKey(api, { name: "slowing", plan: "enterprise", limits: UNLIMITED });
    for (let i = 0; i < 20; i++) await pair(api, key, "AMS", { measured: false });
    const samples = [];
    const t0 = Date.now();
    for (let i = 0; i < opts.slowing; i++) {
      await sleep(t0 + i * opts.slowingGapMs - Date.now());
      samples.push(await pair(api, key, "AMS"));
    }
    // Each request its isolate's lease does not decide (it lapsed) calls the location holder.
    rows.push(
      row(
        "slowing",
        samples,
        [key],
        2,
        `${((1000 * opts.slowing) / (Date.now() - t0)).toFixed(1)} requests a second after 20 back to back`,
      ),
    );
  }

  // The quiet and sparse keys' background requests after their last request, until they end.
  const lastEnd = Math.max(0, ...watched.map((k) => k.sent[k.sent.length - 1]?.endAt ?? 0));
  const waitMs = lastEnd + opts.tailSeconds * 1000 - Date.now();
  if (watched.length && waitMs > 0) {
    log(
      `watching the quiet and sparse keys' background requests for ${(waitMs / 1000).toFixed(0)} s more`,
    );
    await sleep(waitMs);
  }
  // Whatever the last requests started lands within a lease's life.
  await sleep(500);
  const calls = await keyCalls(api);
  const observedUntil = Date.now();
  const costed = rows.map((r) => ({
    ...r,
    ...scenarioCost(r.keys.map((k) => keyCost(k.sent, calls[k.id] ?? [], observedUntil))),
  }));

  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : "–");
  const s = (ms) => (ms === null ? "none" : `${(ms / 1000).toFixed(1)} s`);
  const byHop = (hops) =>
    Object.entries(hops)
      .map(([hop, n]) => `${hop} ${n.toFixed(1)}`)
      .join(", ");
  const byKind = (perMinute) =>
    Object.entries(perMinute)
      .sort((a, b) => b[1] - a[1])
      .map(([kind, n]) => `${kind} ${n.toFixed(2)}`)
      .join(", ");
  /** A row's request and DO request rates a second, when it says how long it took. */
  const perSecond = (r) =>
    Number.isFinite(r.seconds) && r.seconds > 0
      ? `${(r.n / r.seconds).toFixed(0)} requests a second over ${r.seconds.toFixed(1)} s; ` +
        `${((r.doPerThousand * r.n) / 1000 / r.seconds).toFixed(2)} DO requests a second`
      : "";
  // Each row's reference p50 is of its own few samples, and moves by several ms between rows of one
  // run; the p50 of every row's reference samples together is a steadier base to compare rows on.
  const allRefP50 = p(
    costed.flatMap((r) => r.refs),
    0.5,
  );
  const [load1, load5, load15] = os.loadavg();
  const lines = [
    `# Where quota decisions are made (npm run bench:quota)`,
    "",
    `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${os.cpus().length} cores, ` +
      `load average ${load1.toFixed(1)} ${load5.toFixed(1)} ${load15.toFixed(1)}, run took ` +
      `${((Date.now() - started) / 60_000).toFixed(1)} min; simulated round trips: key's object ` +
      `${opts.limiterRtt} ms, D1 ${opts.d1Rtt} ms, location holder ${opts.localRtt} ms. ` +
      `API: GET ${PAGE} (a full, warm page); reference: GET /v1/openapi.json on the same server, ` +
      "right after each API request.",
    "",
    "| scenario | n | p50 | ref p50 | p50 − ref | p50 − all refs | p99 | ref p99 | p99 − ref | far calls waited / 1,000 | far calls in background / 1,000 | local calls / 1,000 | DO requests / 1,000 | holder starts / 1,000 | objects per key | note |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ...costed.map(
      (r) =>
        `| ${r.name} | ${r.n} | ${f(r.p50)} | ${f(r.refP50)} | ${f(r.p50 - r.refP50)} | ${f(r.p50 - allRefP50)} | ${f(r.p99)} | ${f(r.refP99)} | ${f(r.p99 - r.refP99)} | ` +
        `${f(r.far)} | ${f(r.background)} | ${f(r.local)} | ${f(r.doPerThousand)} | ${f(r.startsPerThousand)} | ${r.objectsPerKey} | ${r.note}${perSecond(r)} |`,
    ),
    "",
    `Times in ms. p50 − all refs: the row's p50 above the reference's p50 over every row's ` +
      `samples (${f(allRefP50)} ms), where each row's own reference (ref p50) is of its few samples. ` +
      "Far calls waited for: the Worker's calls to the key's object that its request " +
      "waited for (answered before the response was ready) plus requests the location holder " +
      "forwarded. Far calls in background: the Worker's calls to the key's object a request " +
      "started and did not wait for (its own lease's renewals, still on their way when the " +
      "response was ready). DO requests: every call to the scenario's keys' QuotaLimiter or " +
      "QuotaHolders, from the Worker, a holder or the key's object (background renewals, " +
      "refills and pushes included), and the alarms of the key's object and holders, from the end of each key's " +
      "last unmeasured request (or the start of its first measured one) to the end of its last " +
      "request: each measured request pays for the time since the one before. Holder starts: " +
      "the key's location holders constructed in that window, new or evicted from memory since " +
      "their last call (in production one idle 70–140 s is evicted; the request that finds it so " +
      "waits for its start). Objects per key: the key's QuotaLimiter and one QuotaHolder per location it was used in.",
    "",
    "## While calling, by kind",
    "",
    "| scenario | DO requests a minute per key, by hop and method |",
    "|---|---|",
    ...costed.map((r) => `| ${r.name} | ${byKind(r.perMinuteByKind)} |`),
    "",
    "The DO requests charged to each scenario's requests (the window of the table above), per " +
      "minute of that window per key, by hop (as below) and the method called: e.g. `limiter " +
      "renewLease` an isolate's renewal, `local admitForIsolate` an isolate's call for a lease " +
      "through its location holder, `relayed renewLease` the holder's own renewal or refill.",
    "",
    "## After a key's last request",
    "",
    "| scenario | keys | DO requests per key (mean) | by hop (mean per key) | most for one key | most to its object for one key | last one after | watched for |",
    "|---|---:|---:|---|---:|---:|---:|---:|",
    ...costed.map(
      (r) =>
        `| ${r.name} | ${r.keys.length} | ${f(r.tailPerKey)} | ${byHop(r.tailByHop)} | ${r.tailMostPerKey} | ${r.tailToObjectMostPerKey} | ` +
        `${s(r.lastTailAfterMs)} | ${s(r.observedMs)} |`,
    ),
    "",
    "The Durable Object requests each key still caused after its last request's answer (its " +
      "holders' hand-backs and renewals, the object's pushes and alarms), by hop: `local` the " +
      "Worker to a holder, `limiter` the Worker to the key's object, `relayed` a holder to the " +
      "key's object, `pushed` the key's object to a holder, `alarm` the object's alarm; and the longest time " +
      "from that answer to the start of the last of them over the scenario's keys, watched " +
      "until the report (at least that long for every key of the scenario). Most to its object: " +
      "the `relayed` and `limiter` calls of the key with the most, which docs/quotas.md bounds at " +
      `${STOPPED_KEY_OBJECT_CALLS} per location the key used (\`STOPPED_KEY_OBJECT_CALLS\`), all within ` +
      `${STOPPED_KEY_CALLS_END_WITHIN_MS / 1000} s of its last ` +
      "request (`STANDING_BACKGROUND_ENDS_WITHIN_MS`): watched for less, a key's last hand-back " +
      "may not show (--tail-seconds).",
    "",
  ];
  const md = lines.join("\n");
  writeResult(`${opts.out}.md`, md);
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
