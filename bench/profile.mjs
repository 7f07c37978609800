#!/usr/bin/env node
// @ts-check
// `npm run bench:profile`: where the Worker's CPU goes on the authenticated list (GET
// /v1/pets?limit=20 with an enterprise key: a full, warm page; a busy key decided by its isolate's
// own lease). Starts the API as `npm run bench` does (the bench entry Worker with no simulated
// delays, access log and local trace collector off), loads it with autocannon, and records a V8
// CPU profile of the Worker's isolate over the inspector (wrangler dev's --inspector-port) while
// it does. Prints and writes self time by layer and by function, each function placed in its
// source file and line through the bundle's source map (bench/lib/cpu-profile.mjs). Informs,
// never gates.

import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { cleanupNow, issueKey, snapshotProject } from "../scripts/lib/local-server.mjs";
import { decodeMappings, originalPosition, selfTime, timeByCaller } from "./lib/cpu-profile.mjs";
import { cannon } from "./lib/load.mjs";
import { optionsOrExit } from "./lib/options.mjs";
import { versions, writeResult } from "./lib/report.mjs";
import { seedPets, startBenchApi, UNLIMITED } from "./lib/workers.mjs";

const USAGE = `Usage: npm run bench:profile -- [options]
  --seconds 20         seconds of load while the profile records
  --connections 10     concurrent connections
  --interval-us 50     the profiler's sampling interval, in µs
  --path /v1/pets?limit=20  the request profiled (with the benchmark key)
  --top 30             functions listed
  --port 8870          the API's port (its inspector: port + 2)
  --out profile        bench/results/<out>.md`;

const opts = optionsOrExit(
  process.argv.slice(2),
  {
    seconds: { default: 20, min: 1, max: 600 },
    connections: { default: 10, min: 1 },
    "interval-us": { default: 50, min: 10, max: 10_000 },
    path: { default: "/v1/pets?limit=20", pattern: /^\/[\w/?=&%.-]*$/ },
    top: { default: 30, min: 1, max: 500 },
    port: { default: 8870, min: 1 },
    out: { default: "profile", pattern: /^[a-z0-9][a-z0-9-]{0,60}$/ },
  },
  USAGE,
);

const started = Date.now();
const log = (msg) =>
  console.log(`[bench:profile ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}`);

/** @type {{ stop: () => Promise<unknown> } | null} */
let server = null;

/** A Chrome DevTools Protocol session on the Worker's inspector. */
async function inspectorSession(inspectorPort) {
  const targets = /** @type {{ webSocketDebuggerUrl: string, title?: string }[]} */ (
    await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()
  );
  const target = targets[0];
  if (!target) throw new Error(`no inspector target on port ${inspectorPort}`);
  // wrangler's inspector proxy accepts only a browser-like Origin (Node's WebSocket sends none);
  // `headers` is Node's (undici's) extension of the WebSocket constructor.
  const ws = new WebSocket(
    target.webSocketDebuggerUrl,
    /** @type {any} */ ({
      headers: { Origin: "http://localhost" },
    }),
  );
  await new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve, { once: true });
    ws.addEventListener(
      "error",
      (event) => reject(new Error(`inspector connection failed: ${event.message ?? event.type}`)),
      { once: true },
    );
  });
  let nextId = 1;
  /** @type {Map<number, { resolve: (v: any) => void, reject: (e: Error) => void }>} */
  const pending = new Map();
  /** @type {{ scriptId: string, url: string, sourceMapURL?: string }[]} */
  const scripts = [];
  ws.addEventListener("message", (event) => {
    const msg = JSON.parse(String(event.data));
    if (msg.method === "Debugger.scriptParsed") scripts.push(msg.params);
    const waiting = msg.id && pending.get(msg.id);
    if (!waiting) return;
    pending.delete(msg.id);
    if (msg.error) waiting.reject(new Error(`${msg.error.message} (${msg.error.code})`));
    else waiting.resolve(msg.result);
  });
  return {
    scripts,
    /** @returns {Promise<any>} */
    send(method, params = {}) {
      const id = nextId++;
      ws.send(JSON.stringify({ id, method, params }));
      return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
    },
    close: () => ws.close(),
  };
}

async function main() {
  log(`starting the bench API on port ${opts.port}`);
  const api = await startBenchApi({
    root: snapshotProject({ extra: ["bench/api"] }),
    port: opts.port,
    inspectorPort: opts.port + 2,
    network: { limiterRtt: 0, d1Rtt: 0, localRtt: 0 },
    vars: { ACCESS_LOG: "off" },
    localObservability: false,
  });
  server = api;
  const key = await issueKey(api, { name: "profile", plan: "enterprise", limits: UNLIMITED });
  await seedPets(api, key.key, 200, { prefix: "profile" });
  const headers = { Authorization: `Bearer ${key.key}` };
  const url = `${api.url}${opts.path}`;
  for (let i = 0; i < 5; i++) {
    const res = await fetch(url, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${opts.path} answered ${res.status}`);
  }
  log("warming up for 3 s");
  await cannon({ url, requests: [{}], connections: opts.connections, seconds: 3, headers });

  const session = await inspectorSession(opts.port + 2);
  await session.send("Debugger.enable");
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: opts.intervalUs });
  await session.send("Profiler.start");
  log(`profiling ${opts.seconds} s of ${opts.path} at ${opts.connections} connections`);
  const run = await cannon({
    url,
    requests: [{}],
    connections: opts.connections,
    seconds: opts.seconds,
    headers,
  });
  const { profile } = await session.send("Profiler.stop");
  // The Worker's bundle is minified as deployed: its source map (beside it, while the server
  // runs) names each function's file and line.
  /** @type {Map<string, { sources: string[], names: string[], lines: [number, number, number, number][][] }>} */
  const maps = new Map();
  for (const { scriptId, url: scriptUrl, sourceMapURL } of session.scripts) {
    if (!scriptUrl.startsWith("file://") || !sourceMapURL || sourceMapURL.startsWith("data:"))
      continue;
    const file = path.resolve(path.dirname(fileURLToPath(scriptUrl)), sourceMapURL);
    if (!existsSync(file)) continue;
    const raw = JSON.parse(readFileSync(file, "utf8"));
    maps.set(scriptId, {
      sources: raw.sources,
      names: raw.names,
      lines: decodeMappings(raw.mappings),
    });
  }
  await session.send("Debugger.disable");
  session.close();
  const requests = run.latencies.length;
  const ok = run.statuses[200] ?? 0;
  if (maps.size === 0) log("no source map found: functions are named as in the bundle");
  /** @param {import("./lib/cpu-profile.mjs").CallFrame} frame */
  const placeOf = (frame) => {
    const map = maps.get(frame.scriptId);
    const pos = map && originalPosition(map, frame.lineNumber, frame.columnNumber);
    if (!pos) return { module: frame.url || null };
    // A renamed function's original name, when the map carries one (never for an anonymous one).
    return { module: pos.source, line: pos.line, name: frame.functionName ? pos.name : null };
  };
  const self = selfTime(profile, placeOf);
  const byCaller = timeByCaller(profile, placeOf);
  const perRequest = (ms) => (requests ? (1000 * ms) / requests : NaN); // µs
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  const [load1, load5, load15] = os.loadavg();
  const v = versions();
  const md = [
    "# Where the Worker's CPU goes (npm run bench:profile)",
    "",
    `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${os.cpus().length} cores, ` +
      `load average ${load1.toFixed(1)} ${load5.toFixed(1)} ${load15.toFixed(1)}, ` +
      `wrangler ${v.wrangler}, commit ${v.commit}. ` +
      `GET ${opts.path} with an enterprise key, ${opts.connections} connections for ${opts.seconds} s: ` +
      `${requests} requests (${ok} × 200), ${(requests / run.elapsed).toFixed(0)}/s; the Worker's ` +
      `isolate was busy ${self.busyMs.toFixed(0)} ms (${perRequest(self.busyMs).toFixed(0)} µs a ` +
      `request) and idle ${self.idleMs.toFixed(0)} ms; sampled every ${opts.intervalUs} µs.`,
    "",
    "## Self time by layer",
    "",
    "| layer | ms | µs / request | share of busy time |",
    "|---|---:|---:|---:|",
    ...self.layers.map(
      (l) =>
        `| ${l.layer} | ${l.ms.toFixed(0)} | ${perRequest(l.ms).toFixed(1)} | ${pct(l.share)} |`,
    ),
    "",
    `## Top ${opts.top} functions by self time`,
    "",
    "| function | where | layer | µs / request | share of busy time |",
    "|---|---|---|---:|---:|",
    ...self.functions
      .slice(0, opts.top)
      .map(
        (f) =>
          `| \`${f.name}\` | ${f.module ?? ""}${f.line ? `:${f.line}` : ""} | ${f.layer} | ` +
          `${perRequest(f.ms).toFixed(1)} | ${pct(f.share)} |`,
      ),
    "",
    "## Busy time by the product's code that asked for it",
    "",
    "Each sample goes to the innermost function of the product (`src/…`) on its stack, so the " +
      "runtime, Hono and zod work a product function asks for counts as its own; a sample " +
      "with no product frame goes to the package that made it (Hono's dispatch, its " +
      "validator), else to its own layer.",
    "",
    "| module | µs / request | share of busy time |",
    "|---|---:|---:|",
    ...byCaller.modules
      .slice(0, opts.top)
      .map((m) => `| ${m.name} | ${perRequest(m.ms).toFixed(1)} | ${pct(m.share)} |`),
    "",
    "| function | µs / request | share of busy time |",
    "|---|---:|---:|",
    ...byCaller.functions
      .slice(0, opts.top)
      .map((f) => `| \`${f.name}\` | ${perRequest(f.ms).toFixed(1)} | ${pct(f.share)} |`),
    "",
    "Layers: the product's folders (`src/…`), packages by name, `bench/api` (the bench entry " +
      "Worker's wrapper, idle without simulated delays), the runtime's JavaScript modules by " +
      "scheme, wrangler dev's own wrappers, `runtime` (native code: APIs such as `Response` or " +
      "`Headers` implemented in C++), and V8's own entries: " +
      "`(program)` (native work in the isolate outside JavaScript: the runtime's C++ around " +
      "each request) and `(garbage collector)`.",
    "",
  ].join("\n");
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
    console.error(`bench:profile failed: ${err.stack ?? err}`);
    await server?.stop().catch(() => undefined);
    cleanupNow();
    process.exit(1);
  });
