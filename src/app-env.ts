import type { TimingVariables } from "hono/timing";
import type { KeyRecord } from "./db/keys";
import type { D1Sessions } from "./db/sessions";
import type { Outcome } from "./quota/windows";

/** Hono's type parameters for every app and middleware of the service. */
export interface AppEnv {
  Bindings: Env;
  Variables: TimingVariables & {
    requestId: string;
    /** The authenticated key, set by `authenticate`. */
    apiKey: KeyRecord;
    /** D1 through a Sessions API session (read replicas with read-your-writes). */
    d1: D1Sessions;
    /** For the access log: what the limiter decided, or "unavailable". */
    quota: Outcome | "unavailable";
  };
}
