// The bench's entry Worker: the product's app and Durable Objects, with the QUOTA and DB bindings
// behind a simulated network (./simulated-network.ts). `npm run bench:serve` and `npm run bench`
// run it with the product's wrangler.toml (`wrangler dev bench/api/index.ts`), so it has the same
// bindings, local state and .dev.vars as `npm run dev`; the round trips come from the two
// bench-only variables below, passed as `--var`. Nothing here is part of the deployed Worker
// (scripts/build-check.mjs checks the production bundle).
import { createApp } from "../../src/app";
import { fetchBehindSimulatedNetwork, type SimulatedNetwork } from "./simulated-network";

export { AuthShield } from "../../src/objects/auth-shield";
export { QuotaHolder } from "../../src/objects/quota-holder";
export { QuotaLimiter } from "../../src/objects/quota-limiter";

/** The bench's own settings, on top of the product's (`--var NAME:VALUE`). */
interface BenchEnv extends Env {
  /** Simulated round trip of every call to a key's QuotaLimiter, in ms (default 0: none). */
  BENCH_LIMITER_RTT_MS?: string;
  /** Simulated round trip of every D1 query or batch, in ms (default 0: none). */
  BENCH_D1_RTT_MS?: string;
}

const MAX_RTT_MS = 10_000;

/** A round trip setting in ms, or an error message naming it. */
function rttOf(name: keyof BenchEnv, raw: string | undefined): number | string {
  const ms = Number(raw ?? "0");
  return Number.isInteger(ms) && ms >= 0 && ms <= MAX_RTT_MS
    ? ms
    : `${name} must be a whole number of ms from 0 to ${MAX_RTT_MS}, not ${JSON.stringify(raw)}`;
}

/** The simulated network of `env`, or why the bench refuses to run with it. */
function networkOf(env: BenchEnv): SimulatedNetwork | string {
  // A measurement aid slows every request down on purpose: local only, never a deployed Worker.
  if (env.ENVIRONMENT !== "local")
    return `the bench Worker runs locally only (ENVIRONMENT is ${JSON.stringify(env.ENVIRONMENT)})`;
  const limiterMs = rttOf("BENCH_LIMITER_RTT_MS", env.BENCH_LIMITER_RTT_MS);
  const d1Ms = rttOf("BENCH_D1_RTT_MS", env.BENCH_D1_RTT_MS);
  if (typeof limiterMs === "string") return limiterMs;
  if (typeof d1Ms === "string") return d1Ms;
  return { limiterMs, d1Ms };
}

const app = createApp();

export default {
  fetch(request, env, ctx) {
    const network = networkOf(env);
    if (typeof network === "string")
      return Response.json(
        { code: "internal_error", message: `Bench misconfigured: ${network}`, status: 500 },
        { status: 500 },
      );
    return fetchBehindSimulatedNetwork(
      (req, benchEnv) => Promise.resolve(app.fetch(req, benchEnv, ctx)),
      request,
      env,
      network,
    );
  },
} satisfies ExportedHandler<BenchEnv>;
