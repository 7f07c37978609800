import type { TimingVariables } from "hono/timing";
import type { Config } from "./config";

/**
 * What every request of the service has: the Worker's bindings, its request ids (see
 * middleware/request-id.ts), the validated configuration (parsed before any other work, see
 * app.ts) and Server-Timing (hono/timing). Middleware that sets more declares it where it sets it
 * (for example `ApiKeyVariables` in auth/api-key.ts), and routes add those they rely on.
 *
 * Code that runs on every request reads them with `c.get(name)`: Hono's `c.var` builds a new
 * object of all the request's variables at each access (bench/README.md, the CPU profile).
 */
export interface BaseEnv {
  Bindings: Env;
  Variables: BaseVariables;
}

/**
 * The request's own id, and the client's X-Request-Id when it sent a sane one (set by
 * middleware/request-id.ts).
 */
type RequestIdVariables = { requestId: string; clientRequestId?: string };

type BaseVariables = TimingVariables & RequestIdVariables & { config: Config };

/** BaseEnv plus the variables `V` that middleware earlier in the chain has set. */
export interface EnvWith<V extends object> {
  Bindings: Env;
  Variables: BaseVariables & V;
}
