// The bench's entry Worker: the product's app and Durable Objects, with the QUOTA and DB bindings
// behind a simulated network (./simulated-network.ts). `npm run bench:serve` and `npm run bench`
// run it with the product's wrangler.toml (`wrangler dev bench/api/index.ts`), so it has the same
// bindings, local state and .dev.vars as `npm run dev`; the round trips come from the two
// bench-only variables below, passed as `--var`. Nothing here is part of the deployed Worker
// (scripts/build-check.mjs checks the production bundle).
import { createApp } from "../../src/app";
import { forgetKey } from "../../src/auth/key-cache";
import { keyShapeOf } from "../../src/auth/key-format";
import { QuotaHolder as ProductQuotaHolder } from "../../src/objects/quota-holder";
import { QuotaLimiter as ProductQuotaLimiter } from "../../src/objects/quota-limiter";
import {
  callsByKey,
  callTotals,
  fetchBehindSimulatedNetwork,
  holderEnvBehindSimulatedNetwork,
  limiterEnvBehindSimulatedNetwork,
  recordKeyCall,
  type SimulatedNetwork,
} from "./simulated-network";

export { AuthShield } from "../../src/objects/auth-shield";

/**
 * The product's location holder, its calls to the key's QuotaLimiter behind the far round trip,
 * and its alarms (the hand-back of standing permits kept across an eviction) counted as the key's
 * Durable Object requests (`callsByKey`), and each construction as a start of the key's holder.
 */
export class QuotaHolder extends ProductQuotaHolder {
  constructor(ctx: DurableObjectState, env: BenchEnv) {
    const network = networkOf(env);
    super(ctx, typeof network === "string" ? env : holderEnvBehindSimulatedNetwork(env, network));
    recordKeyCall(ctx.id.name, "start", "");
  }

  override async alarm(): Promise<void> {
    callTotals.alarm++;
    recordKeyCall(this.ctx.id.name, "alarm", "alarm");
    await super.alarm();
  }
}

/**
 * The product's key object, its calls to the key's holders (pushes) behind the far round trip, and
 * its alarms counted as the key's Durable Object requests (`callsByKey`).
 */
export class QuotaLimiter extends ProductQuotaLimiter {
  constructor(ctx: DurableObjectState, env: BenchEnv) {
    const network = networkOf(env);
    super(ctx, typeof network === "string" ? env : limiterEnvBehindSimulatedNetwork(env, network));
  }

  override async alarm(): Promise<void> {
    callTotals.alarm++;
    recordKeyCall(this.ctx.id.name, "alarm", "alarm");
    await super.alarm();
  }
}

/**
 * A request's simulated location: `X-Bench-Location: AMS` makes it arrive with `cf.colo` "AMS",
 * so one server can play several locations (each with its own location holders).
 */
const LOCATION_HEADER = "X-Bench-Location";

function inSimulatedLocation(request: Request): Request {
  const colo = request.headers.get(LOCATION_HEADER);
  if (!colo) return request;
  return new Request(request, { cf: { ...(request.cf ?? {}), colo } } as RequestInit);
}

/**
 * `X-Bench-Cold-Isolate: 1` serves the request as an isolate that has never seen its key would:
 * this isolate's cached record of the key (a key that names its id) is dropped first. A quiet
 * key holds no lease of its own in an isolate, so that is all such an isolate lacks.
 */
const COLD_ISOLATE_HEADER = "X-Bench-Cold-Isolate";

function forgetKeyOf(request: Request): void {
  const token = request.headers.get("Authorization")?.replace(/^Bearer /, "") ?? "";
  const keyId = keyShapeOf(token)?.keyId;
  if (keyId) forgetKey(keyId);
}

/** GET /__bench/calls: every simulated round trip so far, by hop (see `callTotals`). */
const CALL_TOTALS_PATH = "/__bench/calls";

/** GET /__bench/key-calls: every key's Durable Object requests so far (see `callsByKey`). */
const KEY_CALLS_PATH = "/__bench/key-calls";

/** The bench's own settings, on top of the product's (`--var NAME:VALUE`). */
interface BenchEnv extends Env {
  /** Simulated round trip of every call to a key's QuotaLimiter, in ms (default 0: none). */
  BENCH_LIMITER_RTT_MS?: string;
  /** Simulated round trip of every D1 query or batch, in ms (default 0: none). */
  BENCH_D1_RTT_MS?: string;
  /** Simulated round trip of every call to a key's holder in the request's location, in ms. */
  BENCH_LOCAL_RTT_MS?: string;
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
  const localMs = rttOf("BENCH_LOCAL_RTT_MS", env.BENCH_LOCAL_RTT_MS);
  if (typeof limiterMs === "string") return limiterMs;
  if (typeof d1Ms === "string") return d1Ms;
  if (typeof localMs === "string") return localMs;
  return { limiterMs, d1Ms, localMs };
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
    const { pathname } = new URL(request.url);
    if (pathname === CALL_TOTALS_PATH) return Response.json(callTotals);
    if (pathname === KEY_CALLS_PATH) return Response.json(Object.fromEntries(callsByKey));
    if (request.headers.get(COLD_ISOLATE_HEADER) === "1") forgetKeyOf(request);
    return fetchBehindSimulatedNetwork(
      (req, benchEnv) => Promise.resolve(app.fetch(req, benchEnv, ctx)),
      inSimulatedLocation(request),
      env,
      network,
    );
  },
} satisfies ExportedHandler<BenchEnv>;
