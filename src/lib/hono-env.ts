import type { TimingVariables } from "hono/timing";
import type { Config } from "./config";

/**
 * What every request of the service has: the Worker's bindings, a request id (hono/request-id),
 * the validated configuration (parsed before any other work, see app.ts) and Server-Timing
 * (hono/timing). Middleware that sets more declares it where it sets it
 * (for example `ApiKeyVariables` in auth/api-key.ts), and routes add those they rely on.
 */
export interface BaseEnv {
  Bindings: Env;
  Variables: BaseVariables;
}

type BaseVariables = TimingVariables & { requestId: string; config: Config };

/** BaseEnv plus the variables `V` that middleware earlier in the chain has set. */
export interface EnvWith<V extends object> {
  Bindings: Env;
  Variables: BaseVariables & V;
}
