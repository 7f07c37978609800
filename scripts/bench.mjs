// @ts-check
// `npm run bench`: the API next to a do-nothing reference Worker (bench/reference) and, for the
// list, a floor Worker that makes only the two hops a list needs (bench/floor), all under
// `wrangler dev` on loopback, measured in alternating rounds with autocannon. Absolute numbers on
// a shared machine are noise; the ratios to the reference from the same run are the result.
// Writes bench/results/<out>.md and <out>.svg (`--out latest`). Informs, never gates: always exits
// 0 once it ran.
//
// Rounds alternate in ABBA order (reference, API, floor, then floor, API, reference, …) so load
// that drifts over time hits all alike.
// Options: --rounds 6 --seconds 4 --connections 10 --warmup 1 --limiter-seconds 5
//          --limiter-connections 50 --api-port 8801 --ref-port 8802 --floor-port 8805
//          --inspector-port P (API P, reference P+1, floor P+2; default each Worker's port + 2)
//          --access-log off --local-observability off --out latest
//          --limiter-rtt 0 --d1-rtt 0 --sequential 40
//
// --limiter-rtt MS and --d1-rtt MS put the network back in: the API (and the floor) run with
// BENCH_LIMITER_RTT_MS / BENCH_D1_RTT_MS, so every call to a key's QuotaLimiter and every D1
// query waits that long (src/lib/simulated-network.ts; a measurement aid, 0 in every
// environment). The API then reports per response how many of each it made (X-Bench-Calls), and
// the report gives them per 1,000 requests, per operation, with one-request-at-a-time p50/p99.
//
// The API runs with ACCESS_LOG=off unless `--access-log on`: under wrangler dev every console.log
// line costs ~2.5 ms of CPU in wrangler's log forwarding (measured with a one-character line),
// more than the Durable Object and D1 hops together, while at the edge Workers Logs collects
// log lines off the request path. Measure both; the report says which one it is.
//
// Likewise all three Workers run with wrangler dev's local trace collector off
// (X_LOCAL_OBSERVABILITY=false) unless `--local-observability on`. That collector writes every
// invocation's spans into a SQLite-backed object inside the same workerd process, so it costs the
// API more the more spans a request has, and more as its store grows; at the edge traces leave
// after the invocation.

import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import autocannon from "autocannon";
import { fmt, markdown, svgChart, versions } from "./lib/bench-report.mjs";
import {
  cleanupNow,
  issueKey,
  makeTempDir,
  parseArgs,
  ROOT,
  runWrangler,
  seedPets,
  snapshotProject,
  startApi,
  startFloor,
  startReference,
  UNLIMITED,
} from "./lib/local-server.mjs";

const opts = parseArgs(process.argv.slice(2), {
  rounds: 6,
  seconds: 4,
  connections: 10,
  warmup: 1,
  limiterSeconds: 5,
  limiterConnections: 50,
  apiPort: 8801,
  refPort: 8802,
  floorPort: 8805,
  inspectorPort: 0,
  accessLog: "off",
  localObservability: "off",
  out: "latest",
  limiterRtt: 0,
  d1Rtt: 0,
  sequential: 40,
});
for (const name of ["limiterRtt", "d1Rtt", "sequential", "inspectorPort"]) {
  if (!Number.isInteger(opts[name]) || opts[name] < 0 || opts[name] > 65_535)
    throw new Error(
      `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be a whole number`,
    );
}
const inspectorOf = (port, offset) => (opts.inspectorPort ? opts.inspectorPort + offset : port + 2);
if (!/^[a-z0-9][a-z0-9-]{0,60}$/.test(opts.out))
  throw new Error("--out must be a short file name (a-z, 0-9, -)");
for (const name of ["accessLog", "localObservability"]) {
  if (!["on", "off"].includes(opts[name]))
    throw new Error(`--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be on or off`);
}
const started = Date.now();
const log = (msg) =>
  console.log(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}`);

// ------------------------------------------------------------------ measurement

function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function headerValue(headers, name) {
  for (const [k, v] of Object.entries(headers ?? {}))
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(", ") : v;
  return undefined;
}

/**
 * One autocannon run; latencies and statuses are recorded per response so rounds can be merged
 * exactly.
 */
/**
 * @param {{ url: string, requests: object[], connections: number, seconds: number,
 *   headers?: Record<string, string>, sample?: boolean }} options
 */
function cannon({ url, requests, connections, seconds, headers, sample = false }) {
  return new Promise((resolve, reject) => {
    const latencies = [];
    const statuses = {};
    const timings = [];
    const calls = [];
    let n = 0;
    const withSampling = sample
      ? requests.map((r) => ({
          ...r,
          onResponse: (_status, _body, _ctx, h) => {
            if (n++ % 4 === 0) timings.push(headerValue(h, "server-timing"));
            calls.push(headerValue(h, "x-bench-calls"));
          },
        }))
      : requests;
    const t0 = process.hrtime.bigint();
    const instance = autocannon(
      { url, connections, duration: seconds, requests: withSampling, headers },
      (err, result) => {
        if (err) return reject(err);
        const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
        resolve({
          latencies,
          statuses,
          timings,
          calls,
          elapsed,
          errors: result.errors,
          timeouts: result.timeouts,
        });
      },
    );
    instance.on("response", (_client, status, _bytes, ms) => {
      latencies.push(ms);
      statuses[status] = (statuses[status] ?? 0) + 1;
    });
  });
}

function emptyStats() {
  return {
    latencies: [],
    statuses: {},
    timings: [],
    calls: [],
    elapsed: 0,
    errors: 0,
    timeouts: 0,
    rounds: [],
  };
}

function merge(into, run) {
  for (const l of run.latencies) into.latencies.push(l);
  for (const [s, c] of Object.entries(run.statuses)) into.statuses[s] = (into.statuses[s] ?? 0) + c;
  for (const t of run.timings) into.timings.push(t);
  for (const c of run.calls ?? []) into.calls.push(c);
  into.elapsed += run.elapsed;
  into.errors += run.errors;
  into.timeouts += run.timeouts;
  into.rounds.push(run.latencies.length / run.elapsed);
}

function summarize(s) {
  const sorted = Float64Array.from(s.latencies).sort();
  return {
    rps: s.latencies.length / s.elapsed,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    count: s.latencies.length,
    statuses: s.statuses,
    errors: s.errors,
    timeouts: s.timeouts,
    rounds: s.rounds,
  };
}

/**
 * Median and p99 of each Server-Timing metric (auth, quota, db, total …) over the sampled
 * responses.
 */
function serverTiming(samples) {
  const byMetric = {};
  for (const header of samples) {
    if (!header) continue;
    for (const part of header.split(",")) {
      const [name, ...params] = part.trim().split(";");
      const dur = params.map((p) => p.trim().match(/^dur=([0-9.]+)$/)).find(Boolean);
      if (name && dur) (byMetric[name] ??= []).push(Number(dur[1]));
    }
  }
  return Object.fromEntries(
    Object.entries(byMetric).map(([name, values]) => {
      const sorted = Float64Array.from(values).sort();
      return [
        name,
        { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: values.length },
      ];
    }),
  );
}

/**
 * Limiter calls and D1 queries per 1,000 responses, from each sampled response's X-Bench-Calls
 * (`limiter=N, d1=M, d1-pets=P`, sent only while the simulated network is on): all D1 round
 * trips, and those that read or wrote pets (the others are key records, e.g. a key's re-read
 * every 25 s); null when none carried it.
 */
function callsPerThousand(headers) {
  let limiter = 0;
  let d1 = 0;
  let d1Pets = 0;
  let n = 0;
  for (const h of headers) {
    const m = h?.match(/^limiter=(\d+), d1=(\d+), d1-pets=(\d+)$/);
    if (!m) continue;
    limiter += Number(m[1]);
    d1 += Number(m[2]);
    d1Pets += Number(m[3]);
    n++;
  }
  const perThousand = (x) => (1000 * x) / n;
  return n
    ? { limiter: perThousand(limiter), d1: perThousand(d1), d1Pets: perThousand(d1Pets), n }
    : null;
}

// ------------------------------------------------------------------ bundle size

async function bundleSize(root) {
  const dir = makeTempDir("animal-store-bundle-");
  const outdir = path.join(dir, "dist");
  const output = await runWrangler(
    [
      "deploy",
      "--dry-run",
      "--env=",
      "--outdir",
      outdir,
      "--metafile",
      path.join(dir, "meta.json"),
      "--config",
      path.join(root, "wrangler.toml"),
    ],
    { cwd: root },
  );
  const reported = output.match(/Total Upload: ([0-9.]+) KiB \/ gzip: ([0-9.]+) KiB/);
  let raw = 0;
  let gzip = 0;
  for (const file of readdirSync(outdir)) {
    if (!/\.(m?js|wasm)$/.test(file)) continue;
    const bytes = readFileSync(path.join(outdir, file));
    raw += bytes.length;
    gzip += gzipSync(bytes).length;
  }
  // Which packages take the space (bytes in the minified output, before gzip).
  const packages = {};
  try {
    const meta = JSON.parse(readFileSync(path.join(dir, "meta.json"), "utf8"));
    for (const out of Object.values(meta.outputs)) {
      for (const [input, { bytesInOutput }] of Object.entries(out.inputs ?? {})) {
        const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
        const name = input.includes("zod/v4/locales/")
          ? "zod locales"
          : m
            ? m[1]
            : input.startsWith("src/")
              ? "src (this project)"
              : "other";
        packages[name] = (packages[name] ?? 0) + bytesInOutput;
      }
    }
  } catch {
    /* the metafile is a nicety */
  }
  const top = Object.entries(packages)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6);
  return {
    rawKiB: raw / 1024,
    gzipKiB: gzip / 1024,
    wranglerKiB: reported ? Number(reported[2]) : null,
    top,
  };
}

// ------------------------------------------------------------------ limiter microbenchmark

async function limiterBench(api) {
  // Admitted decisions: an unknown /v1 path needs a key and passes the quota check like every
  // /v1 request, then answers 404 without touching D1, so the rate is bound by auth (a warm
  // cache) and the one RPC to the key's QuotaLimiter, which counts and persists each decision.
  const admitKey = await issueKey(api, {
    name: "bench-limiter-admit",
    plan: "enterprise",
    limits: UNLIMITED,
  });
  const headers = { Authorization: `Bearer ${admitKey.key}` };
  const admitted = summarize(
    withOne(
      await cannon({
        url: api.url,
        requests: [{ method: "GET", path: "/v1/limiter-probe" }],
        connections: opts.limiterConnections,
        seconds: opts.limiterSeconds,
        headers,
      }),
    ),
  );
  const usageResponse = await fetch(`${api.url}/admin/v1/keys/${admitKey.id}`, {
    headers: { Authorization: `Bearer ${api.adminToken}` },
  });
  const usage = /** @type {{ usage?: { day?: { count: number } } }} */ (await usageResponse.json());

  // Refused decisions: a key allowed 1 request a day; everything after the first is a 429
  // (quota_exceeded, then key_banned), so the rate is the limiter's refusal path.
  const refuseKey = await issueKey(api, {
    name: "bench-limiter-refuse",
    plan: "enterprise",
    limits: { perMinute: 1, perDay: 1 },
  });
  const refused = summarize(
    withOne(
      await cannon({
        url: api.url,
        requests: [{ method: "GET", path: "/v1/pets?limit=1" }],
        connections: opts.limiterConnections,
        seconds: opts.limiterSeconds,
        headers: { Authorization: `Bearer ${refuseKey.key}` },
      }),
    ),
  );
  return { admitted, refused, doCount: usage?.usage?.day?.count ?? null };
}

function withOne(run) {
  const s = emptyStats();
  merge(s, run);
  return s;
}

// ------------------------------------------------------------------ main

const loadAtStart = os.loadavg()[0];
const servers = [];

/**
 * Client latency and Server-Timing with one request in flight: the cost of a request without
 * queueing.
 */
async function oneAtATime(url, op, headers, n = opts.sequential) {
  const latencies = [];
  const timings = [];
  const calls = [];
  for (let i = 0; i < n; i++) {
    const r = op.requests[i % op.requests.length];
    // The same per-request hook autocannon calls (a fresh Idempotency-Key for each create).
    const req = r.setupRequest?.({ ...r, headers: r.headers ?? headers }) ?? r;
    const t0 = performance.now();
    const res = await fetch(url + req.path, {
      method: req.method,
      headers: req.headers ?? headers,
      body: req.body,
    });
    await res.arrayBuffer();
    latencies.push(performance.now() - t0);
    timings.push(res.headers.get("Server-Timing"));
    calls.push(res.headers.get("X-Bench-Calls"));
  }
  const sorted = Float64Array.from(latencies).sort();
  return {
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    timing: serverTiming(timings),
    calls: callsPerThousand(calls),
  };
}

/** Who runs in a round of `op`, in ABBA order: reference, API (, floor), then the reverse. */
function sides(op, round) {
  const order = op.floor ? ["ref", "api", "floor"] : ["ref", "api"];
  return round % 2 ? order : order.reverse();
}

async function main() {
  const localObservability = opts.localObservability === "on";
  log(
    `starting the API (port ${opts.apiPort}) and the reference Worker (port ${opts.refPort}); ` +
      "bundling for the size check",
  );
  const root = snapshotProject();
  const [api, ref, floor, bundle] = await Promise.all([
    startApi({
      port: opts.apiPort,
      inspectorPort: inspectorOf(opts.apiPort, 0),
      root,
      vars: {
        ACCESS_LOG: opts.accessLog,
        BENCH_LIMITER_RTT_MS: opts.limiterRtt,
        BENCH_D1_RTT_MS: opts.d1Rtt,
      },
      localObservability,
    }),
    startReference({
      port: opts.refPort,
      inspectorPort: inspectorOf(opts.refPort, 1),
      localObservability,
    }),
    startFloor({
      port: opts.floorPort,
      inspectorPort: inspectorOf(opts.floorPort, 2),
      localObservability,
      pets: 200,
      vars: { BENCH_LIMITER_RTT_MS: opts.limiterRtt, BENCH_D1_RTT_MS: opts.d1Rtt },
    }),
    bundleSize(root),
  ]);
  servers.push(api, ref, floor);
  log(`all three answer; bundle ${fmt(bundle.gzipKiB)} KiB gzipped`);

  const benchKey = await issueKey(api, { name: "bench", plan: "enterprise", limits: UNLIMITED });
  const seeded = await seedPets(api, benchKey.key, 200, { prefix: "bench" });
  log(`issued the benchmark key and seeded ${seeded.length} pets`);

  const headers = { Authorization: `Bearer ${benchKey.key}` };
  const ids = seeded.slice(0, 20).map((p) => p.id);
  // Pages 2–9 of the unfiltered list (each full: 20 pets and a next) and the last page of the
  // sold pets (a tail: 66 of the 200 seeded are sold, and the bench only creates pending pets).
  const walk = async (first) => {
    const paths = [];
    let next = first;
    while (next) {
      paths.push(next);
      const res = await fetch(api.url + next, { headers });
      if (res.status !== 200) throw new Error(`walking ${next}: ${res.status}`);
      const link = res.headers.get("Link")?.match(/^<([^>]+)>; rel="next"$/)?.[1];
      // Absolute with PUBLIC_ORIGIN set, else a relative reference: resolve it either way.
      const url = link && new URL(link, api.url);
      next = url && url.pathname + url.search;
    }
    return paths;
  };
  const fullPages = (await walk("/v1/pets?limit=20")).slice(1, 9);
  const tailPage = (await walk("/v1/pets?limit=20&status=sold")).at(-1);
  log(
    `walked the list: ${fullPages.length} full pages after the first; the sold tail is ${tailPage}`,
  );
  const ops = [
    {
      label: "`GET /v1/pets?limit=20` (first page)",
      short: "list",
      requests: [{ method: "GET", path: "/v1/pets?limit=20" }],
      floor: true,
    },
    {
      label: "`GET /v1/pets?limit=20&cursor=…` (pages 2–9, full)",
      short: "pages",
      requests: fullPages.map((path) => ({ method: "GET", path })),
    },
    {
      label: "`GET /v1/pets?limit=20&status=sold&cursor=…` (tail page)",
      short: "tail",
      requests: [{ method: "GET", path: tailPage }],
    },
    {
      label: "`GET /v1/pets?status=available`",
      short: "filter",
      requests: [{ method: "GET", path: "/v1/pets?status=available" }],
    },
    {
      label: "`POST /v1/pets` (new `Idempotency-Key` each)",
      short: "create",
      requests: [
        {
          method: "POST",
          path: "/v1/pets",
          headers: { ...headers, "Content-Type": "application/json" },
          body: JSON.stringify({ name: "Bench", categoryId: 3, status: "pending" }),
          // A fresh key per request: every create is a first create (one D1 batch), not a replay.
          setupRequest: (req) => ({
            ...req,
            headers: { ...req.headers, "Idempotency-Key": randomUUID() },
          }),
        },
      ],
    },
    {
      label: "`GET /v1/pets/{id}`",
      short: "get",
      requests: ids.map((id) => ({ method: "GET", path: `/v1/pets/${id}` })),
    },
  ];
  const targets = { ref, api, floor };
  // Every side samples headers the same way, so the load generator does the same work for each.
  const run = (who, op, seconds) =>
    cannon({
      url: targets[who].url,
      requests: op.requests,
      connections: opts.connections,
      seconds,
      headers,
      sample: true,
    });

  // Every distinct read once, one at a time, before anything is measured: the rounds measure a
  // warm key reading warm pages and pets. Without it, the first request for each of the 20 ids
  // or 8 pages arrives on all connections at once, and each reads D1 (concurrent cold misses in
  // one isolate are not coalesced; see the README's Performance section).
  for (const op of ops)
    for (const r of op.requests)
      if (r.method === "GET")
        for (const who of op.floor ? ["ref", "api", "floor"] : ["ref", "api"]) {
          const res = await fetch(targets[who].url + r.path, { headers });
          await res.arrayBuffer();
        }
  if (opts.warmup > 0) {
    for (const op of ops) for (const who of sides(op, 1)) await run(who, op, opts.warmup);
    log("warmed up");
  }
  const stats = ops.map((op) => ({
    ref: emptyStats(),
    api: emptyStats(),
    ...(op.floor ? { floor: emptyStats() } : {}),
  }));
  for (let round = 1; round <= opts.rounds; round++) {
    for (const [i, op] of ops.entries()) {
      for (const who of sides(op, round)) {
        const result = await run(who, op, opts.seconds);
        if (result.latencies.length === 0)
          throw new Error(
            `the ${who} Worker answered nothing in a ${opts.seconds} s round of ${op.short} ` +
              `(${result.errors} errors, ${result.timeouts} timeouts)`,
          );
        merge(stats[i][who], result);
      }
      const last = (w) => stats[i][w].rounds.at(-1);
      const floorRps = op.floor ? `, floor ${fmt(last("floor"), 0)} req/s` : "";
      log(
        `round ${round}/${opts.rounds} ${op.short.padEnd(6)} ` +
          `reference ${fmt(last("ref"), 0)} req/s, API ${fmt(last("api"), 0)} req/s${floorRps}`,
      );
    }
  }

  log(`one request at a time (no queueing), ${opts.sequential} per operation`);
  const sequential = [];
  for (const op of ops)
    sequential.push({
      ref: await oneAtATime(ref.url, op, headers),
      api: await oneAtATime(api.url, op, headers),
    });

  log("limiter microbenchmark");
  const limiter = await limiterBench(api);

  const rows = ops.map((op, i) => ({
    label: op.label,
    short: op.short,
    ref: summarize(stats[i].ref),
    api: summarize(stats[i].api),
    floor: stats[i].floor && summarize(stats[i].floor),
    timing: serverTiming(stats[i].api.timings),
    calls: callsPerThousand(stats[i].api.calls),
    sequential: sequential[i],
  }));
  const when = new Date();
  const totalSeconds = (Date.now() - started) / 1000;
  const md = markdown({
    opts,
    rows,
    bundle,
    limiter,
    v: versions(),
    when,
    totalSeconds,
    load: [loadAtStart, os.loadavg()[0]],
  });
  const outDir = path.join(ROOT, "bench/results");
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, `${opts.out}.md`), md);
  const minute = when.toISOString().slice(0, 16).replace("T", " ");
  const caption =
    `npm run bench, ${minute} UTC, ${os.cpus().length} cores, ` +
    `${opts.connections} connections, wrangler dev on loopback`;
  writeFileSync(path.join(outDir, `${opts.out}.svg`), svgChart(rows, caption));

  console.log(`\n${md}`);
  console.log(
    `Wrote bench/results/${opts.out}.md and bench/results/${opts.out}.svg ` +
      `(${totalSeconds.toFixed(0)} s).`,
  );
  await Promise.all(servers.map((s) => s.stop()));
}

main()
  .then(() => {
    cleanupNow();
    process.exit(0);
  })
  .catch((err) => {
    console.error(`bench failed: ${err.stack ?? err}`);
    for (const s of servers)
      console.error(`\n--- last lines of ${s.url} (${s.logFile}) ---\n${s.tail()}`);
    cleanupNow();
    process.exit(1);
  });
