// `npm run bench`: the API next to a do-nothing reference Worker (bench/reference), both under
// `wrangler dev` on loopback, measured in alternating rounds with autocannon. Absolute numbers on
// a shared machine are noise; the ratios to the reference from the same run are the result.
// Writes bench/results/latest.md and latest.svg. Informs, never gates: always exits 0 once it ran.
//
// Rounds alternate in ABBA order (reference then API, then API then reference, …) so load that
// drifts over time hits both alike.
// Options: --rounds 4 --seconds 4 --connections 10 --warmup 1 --limiter-seconds 5
//          --limiter-connections 50 --api-port 8801 --ref-port 8802 --access-log off
//
// The API runs with ACCESS_LOG=off unless `--access-log on`: under wrangler dev every console.log
// line costs ~2.5 ms of CPU in wrangler's log forwarding (measured with a one-character line),
// more than the Durable Object and D1 hops together, while at the edge Workers Logs collects
// log lines off the request path. Measure both; the report says which one it is.
import autocannon from "autocannon";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { cleanupNow, issueKey, makeTempDir, parseArgs, ROOT, runWrangler, seedPets, snapshotProject, startApi, startReference } from "./lib/local-server.mjs";

const opts = parseArgs(process.argv.slice(2), {
  rounds: 4,
  seconds: 4,
  connections: 10,
  warmup: 1,
  limiterSeconds: 5,
  limiterConnections: 50,
  apiPort: 8801,
  refPort: 8802,
  accessLog: "off",
});
const BUDGET_KIB = 120;
const TARGETS = { throughput: 0.6, p99: 2 };
const started = Date.now();
const log = (msg) => console.log(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}`);

// ------------------------------------------------------------------ measurement

function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function headerValue(headers, name) {
  for (const [k, v] of Object.entries(headers ?? {})) if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(", ") : v;
  return undefined;
}

/** One autocannon run; latencies and statuses are recorded per response so rounds can be merged exactly. */
function cannon({ url, requests, connections, seconds, headers, sample }) {
  return new Promise((resolve, reject) => {
    const latencies = [];
    const statuses = {};
    const timings = [];
    let n = 0;
    const withSampling = sample
      ? requests.map((r) => ({
          ...r,
          onResponse: (_status, _body, _ctx, h) => {
            if (n++ % 4 === 0) timings.push(headerValue(h, "server-timing"));
          },
        }))
      : requests;
    const t0 = process.hrtime.bigint();
    const instance = autocannon({ url, connections, duration: seconds, requests: withSampling, headers }, (err, result) => {
      if (err) return reject(err);
      const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
      resolve({ latencies, statuses, timings, elapsed, errors: result.errors, timeouts: result.timeouts });
    });
    instance.on("response", (_client, status, _bytes, ms) => {
      latencies.push(ms);
      statuses[status] = (statuses[status] ?? 0) + 1;
    });
  });
}

function emptyStats() {
  return { latencies: [], statuses: {}, timings: [], elapsed: 0, errors: 0, timeouts: 0, rounds: [] };
}

function merge(into, run) {
  for (const l of run.latencies) into.latencies.push(l);
  for (const [s, c] of Object.entries(run.statuses)) into.statuses[s] = (into.statuses[s] ?? 0) + c;
  for (const t of run.timings) into.timings.push(t);
  into.elapsed += run.elapsed;
  into.errors += run.errors;
  into.timeouts += run.timeouts;
  into.rounds.push(run.latencies.length / run.elapsed);
}

function summarize(s) {
  const sorted = Float64Array.from(s.latencies).sort();
  return { rps: s.latencies.length / s.elapsed, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), count: s.latencies.length, statuses: s.statuses, errors: s.errors, timeouts: s.timeouts, rounds: s.rounds };
}

/** Median and p99 of each Server-Timing metric (auth, quota, db, total …) over the sampled responses. */
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
      return [name, { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: values.length }];
    }),
  );
}

// ------------------------------------------------------------------ bundle size

async function bundleSize(root) {
  const dir = makeTempDir("animal-store-bundle-");
  const outdir = path.join(dir, "dist");
  const output = await runWrangler(["deploy", "--dry-run", "--minify", "--env=", "--outdir", outdir, "--metafile", path.join(dir, "meta.json"), "--config", path.join(root, "wrangler.toml")], { cwd: root });
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
        const name = input.includes("zod/v4/locales/") ? "zod locales" : m ? m[1] : input.startsWith("src/") ? "src (this project)" : "other";
        packages[name] = (packages[name] ?? 0) + bytesInOutput;
      }
    }
  } catch {
    /* the metafile is a nicety */
  }
  const top = Object.entries(packages).sort((a, b) => b[1] - a[1]).slice(0, 6);
  return { rawKiB: raw / 1024, gzipKiB: gzip / 1024, wranglerKiB: reported ? Number(reported[2]) : null, top };
}

// ------------------------------------------------------------------ limiter microbenchmark

async function limiterBench(api) {
  // Admitted decisions: an unknown /v1 path needs a key and passes the quota check like every
  // /v1 request, then answers 404 without touching D1, so the rate is bound by auth (a warm
  // cache) and the one RPC to the key's QuotaLimiter, which counts and persists each decision.
  const big = 1_000_000_000_000;
  const admitKey = await issueKey(api, { name: "bench-limiter-admit", plan: "enterprise", limits: { perMinute: big, perDay: big } });
  const headers = { Authorization: `Bearer ${admitKey.key}` };
  const admitted = summarize(withOne(await cannon({ url: api.url, requests: [{ method: "GET", path: "/v1/limiter-probe" }], connections: opts.limiterConnections, seconds: opts.limiterSeconds, headers })));
  const usage = await (await fetch(`${api.url}/admin/v1/keys/${admitKey.id}`, { headers: { Authorization: `Bearer ${api.adminToken}` } })).json();

  // Refused decisions: a key allowed 1 request a day; everything after the first is a 429
  // (quota_exceeded, then key_banned), so the rate is the limiter's refusal path.
  const refuseKey = await issueKey(api, { name: "bench-limiter-refuse", plan: "enterprise", limits: { perMinute: 1, perDay: 1 } });
  const refused = summarize(withOne(await cannon({ url: api.url, requests: [{ method: "GET", path: "/v1/pets?limit=1" }], connections: opts.limiterConnections, seconds: opts.limiterSeconds, headers: { Authorization: `Bearer ${refuseKey.key}` } })));
  return { admitted, refused, doCount: usage?.usage?.day?.count ?? null };
}

function withOne(run) {
  const s = emptyStats();
  merge(s, run);
  return s;
}

// ------------------------------------------------------------------ report

const fmt = (n, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");
const pass = (ok) => (ok ? "PASS" : "FAIL");

function versions() {
  const pkg = (name) => {
    try {
      return JSON.parse(readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
    } catch {
      return "?";
    }
  };
  let commit = "?";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    if (execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: ROOT, encoding: "utf8" }).trim()) commit += " (+ uncommitted changes)";
  } catch {
    /* not a git checkout */
  }
  return { node: process.version, wrangler: pkg("wrangler"), workerd: pkg("workerd"), autocannon: pkg("autocannon"), hono: pkg("hono"), commit };
}

function svgChart(rows, caption) {
  const W = 820;
  const H = 340;
  const panelW = 380;
  const top = 60;
  const chartH = 200;
  const colors = { ref: "#9aa5b1", api: "#f38020" };
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const parts = [];
  const panel = (x0, title, key, unit) => {
    const max = Math.max(...rows.flatMap((r) => [r.ref[key], r.api[key]]).filter(Number.isFinite), 1) * 1.15;
    parts.push(`<text x="${x0 + panelW / 2}" y="${top - 22}" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
    parts.push(`<line x1="${x0 + 30}" y1="${top + chartH}" x2="${x0 + panelW}" y2="${top + chartH}" stroke="#333"/>`);
    const groupW = (panelW - 40) / rows.length;
    rows.forEach((r, i) => {
      const gx = x0 + 40 + i * groupW;
      const barW = (groupW - 16) / 2;
      [["ref", r.ref[key]], ["api", r.api[key]]].forEach(([who, v], j) => {
        const h = Number.isFinite(v) ? (v / max) * chartH : 0;
        const x = gx + j * barW;
        const y = top + chartH - h;
        parts.push(`<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${colors[who]}"/>`);
        parts.push(`<text x="${(x + barW / 2 - 1).toFixed(1)}" y="${(y - 4).toFixed(1)}" text-anchor="middle" font-size="9">${esc(fmt(v, key === "rps" ? 0 : 1))}</text>`);
      });
      parts.push(`<text x="${(gx + barW).toFixed(1)}" y="${top + chartH + 16}" text-anchor="middle" font-size="10">${esc(r.short)}</text>`);
      parts.push(`<text x="${(gx + barW).toFixed(1)}" y="${top + chartH + 29}" text-anchor="middle" font-size="9" fill="#555">${esc(fmt(r.api[key] / r.ref[key], 2))}×</text>`);
    });
    parts.push(`<text x="${x0 + 30}" y="${top + chartH + 44}" font-size="10" fill="#555">${esc(unit)}; API ÷ reference under each operation</text>`);
  };
  panel(20, "Throughput (requests/s, higher is better)", "rps", "requests per second");
  panel(420, "p99 latency (ms, lower is better)", "p99", "milliseconds");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">
<rect width="${W}" height="${H}" fill="#fff"/>
<text x="${W / 2}" y="16" text-anchor="middle" font-size="10" fill="#555">${esc(caption)}</text>
${parts.join("\n")}
<rect x="260" y="${H - 30}" width="12" height="12" fill="${colors.ref}"/><text x="278" y="${H - 20}" font-size="12">reference Worker</text>
<rect x="420" y="${H - 30}" width="12" height="12" fill="${colors.api}"/><text x="438" y="${H - 20}" font-size="12">Animal Store API</text>
</svg>
`;
}

function markdown({ rows, bundle, limiter, v, when, totalSeconds, load }) {
  const list = rows[0];
  const cpu = os.cpus();
  const lines = [];
  lines.push("# Benchmark: latest run", "");
  lines.push(`- Date: ${when.toISOString()}`);
  lines.push(`- Machine: ${cpu.length} × ${cpu[0]?.model ?? "?"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()} (${os.arch()})`);
  lines.push(`- Load average (1 min) at start / end: ${fmt(load[0], 2)} / ${fmt(load[1], 2)} (other work on the machine skews absolute numbers; compare ratios)`);
  lines.push(`- Versions: Node ${v.node}, wrangler ${v.wrangler}, workerd ${v.workerd}, hono ${v.hono}, autocannon ${v.autocannon}; commit ${v.commit}`);
  lines.push(`- Method: both Workers under \`wrangler dev\` on 127.0.0.1 (the API from a snapshot of the working tree taken at the start), ${opts.warmup} s warm-up per operation, then ${opts.rounds} alternating rounds (reference/API, then API/reference, …) of ${opts.seconds} s per operation, ${opts.connections} connections, autocannon in the same process; latencies merged over all rounds. Whole run: ${totalSeconds.toFixed(0)} s.`);
  lines.push(`- API access log: **${opts.accessLog}** (\`ACCESS_LOG=${opts.accessLog}\`; \`--access-log on|off\`). Under wrangler dev each console.log line costs ~2.5 ms CPU in wrangler's log forwarding, which the edge does not pay on the request path.`);
  lines.push("", "| Operation | Reference req/s | API req/s | Throughput ratio | Reference p50 / p99 (ms) | API p50 / p99 (ms) | p99 ratio | API statuses |");
  lines.push("|---|---:|---:|---:|---:|---:|---:|---|");
  for (const r of rows) {
    const st = Object.entries(r.api.statuses).map(([s, c]) => `${s}×${c}`).join(" ");
    lines.push(`| ${r.label} | ${fmt(r.ref.rps, 0)} | ${fmt(r.api.rps, 0)} | ${fmt(r.api.rps / r.ref.rps, 2)}× | ${fmt(r.ref.p50)} / ${fmt(r.ref.p99)} | ${fmt(r.api.p50)} / ${fmt(r.api.p99)} | ${fmt(r.api.p99 / r.ref.p99, 2)}× | ${st}${r.api.errors ? `, ${r.api.errors} errors` : ""} |`);
  }
  lines.push("", "![Throughput and p99 latency, reference vs API](latest.svg)", "");
  lines.push("## Targets (authenticated list, `GET /v1/pets?limit=20`)", "");
  lines.push(`- Throughput ≥ ${TARGETS.throughput}× reference: ${fmt(list.api.rps / list.ref.rps, 2)}× — **${pass(list.api.rps / list.ref.rps >= TARGETS.throughput)}**`);
  lines.push(`- p99 ≤ ${TARGETS.p99}× reference: ${fmt(list.api.p99 / list.ref.p99, 2)}× — **${pass(list.api.p99 / list.ref.p99 <= TARGETS.p99)}**`);
  const perRound = list.api.rounds.map((a, i) => a / list.ref.rounds[i]);
  const median = [...perRound].sort((a, b) => a - b)[Math.floor((perRound.length - 1) / 2)];
  lines.push(`- Throughput ratio per round: ${perRound.map((r) => fmt(r, 2)).join(", ")} (median ${fmt(median, 2)}); a wide spread means the machine was busy with other work`);
  lines.push("", "## Where the API's time goes (Server-Timing, ms, every 4th response under load)", "");
  const metrics = [...new Set(rows.flatMap((r) => Object.keys(r.timing)))];
  lines.push(`| Operation | ${metrics.map((m) => `${m} p50 / p99`).join(" | ")} |`);
  lines.push(`|---|${metrics.map(() => "---:").join("|")}|`);
  for (const r of rows) lines.push(`| ${r.label} | ${metrics.map((m) => (r.timing[m] ? `${fmt(r.timing[m].p50, 1)} / ${fmt(r.timing[m].p99, 1)}` : "–")).join(" | ")} |`);
  lines.push("", "One request at a time (25 per operation, after the rounds; p50, ms):", "");
  lines.push(`| Operation | Reference client p50 | API client p50 | API ${metrics.map((m) => `${m}`).join(" / ")} (Server-Timing p50) |`, "|---|---:|---:|---:|");
  for (const r of rows) lines.push(`| ${r.label} | ${fmt(r.sequential.ref.p50)} | ${fmt(r.sequential.api.p50)} | ${metrics.map((m) => fmt(r.sequential.api.timing[m]?.p50, 0)).join(" / ")} |`);
  lines.push("", "`total` is the time inside the Worker; the client-side p50 minus it is the wrangler dev proxy, the loopback and the load generator, which the reference pays too.");
  lines.push("", "## Bundle size (`wrangler deploy --dry-run`, minified as deployed)", "");
  lines.push(`- Minified: ${fmt(bundle.rawKiB, 1)} KiB; gzipped: ${fmt(bundle.gzipKiB, 1)} KiB (wrangler reports ${bundle.wranglerKiB ?? "n/a"} KiB); budget ${BUDGET_KIB} KiB — **${pass(bundle.gzipKiB <= BUDGET_KIB)}**`);
  if (bundle.top.length) lines.push(`- Largest parts (minified, before gzip): ${bundle.top.map(([n, b]) => `${n} ${fmt(b / 1024, 1)} KiB`).join(", ")}`);
  lines.push("", "## Limiter microbenchmark (one key's QuotaLimiter, real API, " + `${opts.limiterConnections} connections, ${opts.limiterSeconds} s)`, "");
  lines.push("| Path | Decisions/s | p50 / p99 (ms) | Statuses |", "|---|---:|---:|---|");
  const st = (s) => Object.entries(s.statuses).map(([k, c]) => `${k}×${c}`).join(" ");
  lines.push(`| Admitted (\`GET /v1/limiter-probe\`: auth, admit, 404; no D1) | ${fmt(limiter.admitted.rps, 0)} | ${fmt(limiter.admitted.p50)} / ${fmt(limiter.admitted.p99)} | ${st(limiter.admitted)} |`);
  lines.push(`| Refused (key allowed 1 request a day: 429 quota_exceeded, then key_banned) | ${fmt(limiter.refused.rps, 0)} | ${fmt(limiter.refused.p50)} / ${fmt(limiter.refused.p99)} | ${st(limiter.refused)} |`);
  lines.push("", `The admitting key's object counted ${limiter.doCount ?? "n/a"} decisions today; the client saw ${limiter.admitted.count} responses (requests still in flight when the load generator stopped were counted but not seen). The refusing key was admitted exactly ${limiter.refused.statuses[200] ?? 0} time(s) (expected 1).`);
  lines.push("", "Reproduce with `npm run bench` (options: `--rounds`, `--seconds`, `--connections`). Locally, every request crosses wrangler's dev proxy and all objects live in one workerd process; at the edge the Durable Object and D1 are network hops away, so production latency is dominated by those hops, not by the CPU time measured here.");
  return lines.join("\n") + "\n";
}

// ------------------------------------------------------------------ main

const loadAtStart = os.loadavg()[0];
const servers = [];

/** Client latency and Server-Timing with one request in flight: the cost of a request without queueing. */
async function oneAtATime(url, op, headers, n = 25) {
  const latencies = [];
  const timings = [];
  for (let i = 0; i < n; i++) {
    const r = op.requests[i % op.requests.length];
    const t0 = performance.now();
    const res = await fetch(url + r.path, { method: r.method, headers: r.headers ?? headers, body: r.body });
    await res.arrayBuffer();
    latencies.push(performance.now() - t0);
    timings.push(res.headers.get("Server-Timing"));
  }
  const sorted = Float64Array.from(latencies).sort();
  return { p50: percentile(sorted, 0.5), timing: serverTiming(timings) };
}

async function main() {
  log(`starting the API (port ${opts.apiPort}) and the reference Worker (port ${opts.refPort}); bundling for the size check`);
  const root = snapshotProject();
  const [api, ref, bundle] = await Promise.all([
    startApi({ port: opts.apiPort, inspectorPort: opts.apiPort + 2, root, vars: { ACCESS_LOG: opts.accessLog } }),
    startReference({ port: opts.refPort, inspectorPort: opts.refPort + 2 }),
    bundleSize(root),
  ]);
  servers.push(api, ref);
  log(`both answer; bundle ${fmt(bundle.gzipKiB)} KiB gzipped`);

  const benchKey = await issueKey(api, { name: "bench", plan: "enterprise", limits: { perMinute: 1_000_000_000_000, perDay: 1_000_000_000_000 } });
  const seeded = await seedPets(api, benchKey.key, 200, { prefix: "bench" });
  log(`issued the benchmark key and seeded ${seeded.length} pets`);

  const headers = { Authorization: `Bearer ${benchKey.key}` };
  const ids = seeded.slice(0, 20).map((p) => p.id);
  const ops = [
    { label: "`GET /v1/pets?limit=20`", short: "list", requests: [{ method: "GET", path: "/v1/pets?limit=20" }] },
    { label: "`GET /v1/pets?status=available`", short: "filter", requests: [{ method: "GET", path: "/v1/pets?status=available" }] },
    { label: "`POST /v1/pets`", short: "create", requests: [{ method: "POST", path: "/v1/pets", headers: { ...headers, "Content-Type": "application/json" }, body: JSON.stringify({ name: "Bench", categoryId: 3, status: "pending" }) }] },
    { label: "`GET /v1/pets/{id}`", short: "get", requests: ids.map((id) => ({ method: "GET", path: `/v1/pets/${id}` })) },
  ];
  const targets = { ref, api };
  // Both sides sample headers the same way, so the load generator does the same work for each.
  const run = (who, op, seconds) => cannon({ url: targets[who].url, requests: op.requests, connections: opts.connections, seconds, headers, sample: true });

  if (opts.warmup > 0) {
    for (const op of ops) for (const who of ["ref", "api"]) await run(who, op, opts.warmup);
    log("warmed up");
  }
  const stats = ops.map(() => ({ ref: emptyStats(), api: emptyStats() }));
  for (let round = 1; round <= opts.rounds; round++) {
    for (const [i, op] of ops.entries()) {
      for (const who of round % 2 ? ["ref", "api"] : ["api", "ref"]) {
        const result = await run(who, op, opts.seconds);
        if (result.latencies.length === 0) throw new Error(`the ${who === "api" ? "API" : "reference"} answered nothing in a ${opts.seconds} s round of ${op.short} (${result.errors} errors, ${result.timeouts} timeouts)`);
        merge(stats[i][who], result);
      }
      const last = (w) => stats[i][w].rounds.at(-1);
      log(`round ${round}/${opts.rounds} ${op.short.padEnd(6)} reference ${fmt(last("ref"), 0)} req/s, API ${fmt(last("api"), 0)} req/s`);
    }
  }

  log("one request at a time (no queueing), 25 per operation");
  const sequential = [];
  for (const op of ops) sequential.push({ ref: await oneAtATime(ref.url, op, headers), api: await oneAtATime(api.url, op, headers) });

  log("limiter microbenchmark");
  const limiter = await limiterBench(api);

  const rows = ops.map((op, i) => ({ label: op.label, short: op.short, ref: summarize(stats[i].ref), api: summarize(stats[i].api), timing: serverTiming(stats[i].api.timings), sequential: sequential[i] }));
  const when = new Date();
  const totalSeconds = (Date.now() - started) / 1000;
  const md = markdown({ rows, bundle, limiter, v: versions(), when, totalSeconds, load: [loadAtStart, os.loadavg()[0]] });
  const outDir = path.join(ROOT, "bench/results");
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, "latest.md"), md);
  writeFileSync(path.join(outDir, "latest.svg"), svgChart(rows, `npm run bench, ${when.toISOString().slice(0, 16).replace("T", " ")} UTC, ${os.cpus().length} cores, ${opts.connections} connections, wrangler dev on loopback`));

  console.log("\n" + md);
  console.log(`Wrote bench/results/latest.md and bench/results/latest.svg (${totalSeconds.toFixed(0)} s).`);
  await Promise.all([api.stop(), ref.stop()]);
}

main()
  .then(() => {
    cleanupNow();
    process.exit(0);
  })
  .catch((err) => {
    console.error(`bench failed: ${err.stack ?? err}`);
    for (const s of servers) console.error(`\n--- last lines of ${s.url} (${s.logFile}) ---\n${s.tail()}`);
    cleanupNow();
    process.exit(1);
  });
