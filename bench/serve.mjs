#!/usr/bin/env node
// @ts-check
// `npm run bench:serve -- --port P --limiter-rtt MS --d1-rtt MS`: the API as `npm run dev` starts
// it (the same local state under .wrangler/, .dev.vars and admin token), but as the bench entry
// Worker (bench/api/index.ts): every call to a key's QuotaLimiter and every D1 query waits its
// simulated round trip, and each response says how many it made (X-Bench-Calls). For poking at
// the API by hand under the network `npm run bench` measures with.
import { runLocalDev } from "../scripts/lib/local-dev.mjs";
import { optionsOrExit } from "./lib/options.mjs";
import { BENCH_ENTRY, networkVars } from "./lib/workers.mjs";

const opts = optionsOrExit(
  process.argv.slice(2),
  {
    port: { default: 8787, min: 1 },
    "limiter-rtt": { default: 0, max: 10_000 },
    "d1-rtt": { default: 0, max: 10_000 },
    "local-rtt": { default: 0, max: 10_000 },
  },
  `Usage: npm run bench:serve -- [--port 8787] [--limiter-rtt 0] [--d1-rtt 0] [--local-rtt 0]
  --port         the port to serve on
  --limiter-rtt  simulated round trip of each call to a key's QuotaLimiter, in ms
  --d1-rtt       simulated round trip of each D1 query or batch, in ms
  --local-rtt    simulated round trip of each call to a key's holder in the request's location
                 (X-Bench-Location: AMS marks a request as arriving in AMS), in ms`,
);
const vars = networkVars({
  limiterRtt: opts.limiterRtt,
  d1Rtt: opts.d1Rtt,
  localRtt: opts.localRtt,
});
runLocalDev({
  entry: BENCH_ENTRY,
  args: [
    "--port",
    String(opts.port),
    ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
  ],
  title: `Animal Store API (bench: QuotaLimiter round trip ${opts.limiterRtt} ms, D1 ${opts.d1Rtt} ms, local ${opts.localRtt} ms)`,
});
