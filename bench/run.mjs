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
// Options: see USAGE below (`npm run bench -- --help`).
//
// The API runs as the bench entry Worker (bench/api/index.ts), as `npm run bench:serve` runs it.
// --limiter-rtt MS and --d1-rtt MS put the network back in: every call to a key's QuotaLimiter
// and every D1 query waits that long (bench/api/simulated-network.ts; the floor Worker waits the
// same). The API then reports per response how many of each it made (X-Bench-Calls), and the
// report gives them per 1,000 requests, per operation, with one-request-at-a-time p50/p99.
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

import os from "node:os";
import { cleanupNow, issueKey, snapshotProject } from "../scripts/lib/local-server.mjs";
import { bundleSize } from "./lib/bundle-size.mjs";
import { limiterBench } from "./lib/limiter.mjs";
import { cannon, emptyStats, merge, oneAtATime, summarize } from "./lib/load.mjs";
import { operations } from "./lib/operations.mjs";
import { optionsOrExit } from "./lib/options.mjs";
import { fmt, markdown, svgChart, versions, writeResult } from "./lib/report.mjs";
import { callsPerThousand, serverTiming } from "./lib/samples.mjs";
import { seedPets, startBenchApi, startFloor, startReference, UNLIMITED } from "./lib/workers.mjs";

const USAGE = `Usage: npm run bench -- [options]
  --rounds 6               measured rounds per operation (ABBA order)
  --seconds 4              seconds per side per round
  --connections 10         concurrent connections
  --warmup 1               seconds of warm-up per side and operation (0: none)
  --sequential 40          one-at-a-time requests per operation
  --limiter-seconds 5      the limiter microbenchmark's seconds
  --limiter-connections 50 and its connections
  --limiter-rtt 0          simulated round trip of each QuotaLimiter call, in ms
  --d1-rtt 0               simulated round trip of each D1 query, in ms
  --local-rtt 0            simulated round trip of each call to a key's location holder, in ms
  --api-port 8801 --ref-port 8802 --floor-port 8805
  --inspector-port P       API P, reference P+1, floor P+2 (default: each Worker's port + 2)
  --access-log off         the API's access log (on|off)
  --local-observability off  wrangler dev's local trace collector (on|off)
  --out latest             bench/results/<out>.md and .svg`;

const opts = optionsOrExit(
  process.argv.slice(2),
  {
    rounds: { default: 6, min: 1 },
    seconds: { default: 4, min: 1 },
    connections: { default: 10, min: 1 },
    warmup: { default: 1 },
    sequential: { default: 40 },
    "limiter-seconds": { default: 5, min: 1 },
    "limiter-connections": { default: 50, min: 1 },
    "limiter-rtt": { default: 0, max: 10_000 },
    "d1-rtt": { default: 0, max: 10_000 },
    "local-rtt": { default: 0, max: 10_000 },
    "api-port": { default: 8801, min: 1 },
    "ref-port": { default: 8802, min: 1 },
    "floor-port": { default: 8805, min: 1 },
    "inspector-port": { default: 0 },
    "access-log": { default: "off", choices: ["on", "off"] },
    "local-observability": { default: "off", choices: ["on", "off"] },
    out: { default: "latest", pattern: /^[a-z0-9][a-z0-9-]{0,60}$/ },
  },
  USAGE,
);
const inspectorOf = (port, offset) => (opts.inspectorPort ? opts.inspectorPort + offset : port + 2);
const network = { limiterRtt: opts.limiterRtt, d1Rtt: opts.d1Rtt, localRtt: opts.localRtt };
const started = Date.now();
const log = (msg) =>
  console.log(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}`);

const loadAtStart = os.loadavg()[0];
const servers = [];

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
  // One snapshot of the working tree for the API and the size of the product's bundle.
  const root = snapshotProject({ extra: ["bench/api"] });
  const [api, ref, floor, bundle] = await Promise.all([
    startBenchApi({
      root,
      port: opts.apiPort,
      inspectorPort: inspectorOf(opts.apiPort, 0),
      network,
      vars: { ACCESS_LOG: opts.accessLog },
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
      network,
      localObservability,
      pets: 200,
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
  const ops = await operations(api.url, headers, ids);
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
      ref: await oneAtATime(ref.url, op, headers, opts.sequential),
      api: await oneAtATime(api.url, op, headers, opts.sequential),
    });

  log("limiter microbenchmark");
  const limiter = await limiterBench(api, {
    connections: opts.limiterConnections,
    seconds: opts.limiterSeconds,
  });

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
  writeResult(`${opts.out}.md`, md);
  const minute = when.toISOString().slice(0, 16).replace("T", " ");
  const caption =
    `npm run bench, ${minute} UTC, ${os.cpus().length} cores, ` +
    `${opts.connections} connections, wrangler dev on loopback`;
  writeResult(`${opts.out}.svg`, svgChart(rows, caption));

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
