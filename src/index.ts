import { createApp } from "./app";
import { configOrThrow } from "./lib/config";
import { fetchBehindSimulatedNetwork, type SimulatedRtt } from "./lib/simulated-network";

export { AuthShield } from "./objects/auth-shield";
export { QuotaHolder } from "./objects/quota-holder";
export { QuotaLimiter } from "./objects/quota-limiter";

const app = createApp();

export default {
  fetch(request, env, ctx) {
    // The bench's simulated network (off everywhere but in `npm run bench --limiter-rtt/--d1-rtt`).
    // A configuration error is left for the app to answer (500 with a log line).
    let rtt: SimulatedRtt | undefined;
    try {
      const config = configOrThrow(env);
      if (config.BENCH_LIMITER_RTT_MS > 0 || config.BENCH_D1_RTT_MS > 0)
        rtt = { limiterMs: config.BENCH_LIMITER_RTT_MS, d1Ms: config.BENCH_D1_RTT_MS };
    } catch {
      rtt = undefined;
    }
    if (!rtt) return app.fetch(request, env, ctx);
    return fetchBehindSimulatedNetwork(
      (req, benchEnv) => Promise.resolve(app.fetch(req, benchEnv, ctx)),
      request,
      env,
      rtt,
    );
  },
} satisfies ExportedHandler<Env>;
