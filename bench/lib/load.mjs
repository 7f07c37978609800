// @ts-check
// Load and latency: autocannon runs recorded per response (so rounds merge exactly), and
// one-request-at-a-time runs (the cost of a request without queueing).
import autocannon from "autocannon";
import { callsPerThousand, percentile, serverTiming } from "./samples.mjs";

function headerValue(headers, name) {
  for (const [k, v] of Object.entries(headers ?? {}))
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(", ") : v;
  return undefined;
}

/**
 * One autocannon run; latencies and statuses are recorded per response so rounds can be merged
 * exactly. With `sample`, every response's X-Bench-Calls and every fourth one's Server-Timing
 * are kept.
 * @param {{ url: string, requests: object[], connections: number, seconds: number,
 *   headers?: Record<string, string>, sample?: boolean }} options
 */
export function cannon({ url, requests, connections, seconds, headers, sample = false }) {
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

/** Merged runs of one side of one operation (see `merge`). */
export function emptyStats() {
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

/** Adds one `cannon` run to `into`; its rate is kept as one round. */
export function merge(into, run) {
  for (const l of run.latencies) into.latencies.push(l);
  for (const [s, c] of Object.entries(run.statuses)) into.statuses[s] = (into.statuses[s] ?? 0) + c;
  for (const t of run.timings) into.timings.push(t);
  for (const c of run.calls ?? []) into.calls.push(c);
  into.elapsed += run.elapsed;
  into.errors += run.errors;
  into.timeouts += run.timeouts;
  into.rounds.push(run.latencies.length / run.elapsed);
}

/** Throughput, p50, p99 and counts of merged runs. */
export function summarize(s) {
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

/** The summary of a single run. */
export function summarizeRun(run) {
  const s = emptyStats();
  merge(s, run);
  return summarize(s);
}

/**
 * Client latency and Server-Timing of `n` requests of `op`, one in flight at a time: the cost of
 * a request without queueing.
 * @param {string} url
 * @param {{ requests: any[] }} op
 * @param {Record<string, string>} headers
 * @param {number} n
 */
export async function oneAtATime(url, op, headers, n) {
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
