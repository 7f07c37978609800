import { z } from "zod";
import { log } from "./log";

/** An empty secret is no secret: treat it as unset. */
const secret = z
  .string()
  .optional()
  .transform((s) => (s ? s : undefined));

/** Comma-separated origins (`https://app.example.com`); empty turns CORS off. */
const origins = z
  .string()
  .default("")
  .transform((s) =>
    s
      .split(",")
      .map((o) => o.trim())
      .filter(Boolean),
  )
  .pipe(
    z.array(
      z
        .url({ protocol: /^https?$/ })
        .refine((o) => URL.canParse(o) && new URL(o).origin === o, "must be an origin"),
    ),
  );

/**
 * The API's public origin (`https://api.example.com`), for absolute links such as the next page's;
 * empty: links are relative references (`</v1/pets?…>`). Never taken from the request's Host.
 */
const publicOrigin = z
  .string()
  .default("")
  .refine(
    (s) =>
      s === "" ||
      (URL.canParse(s) && /^https?:$/.test(new URL(s).protocol) && new URL(s).origin === s),
    "must be an origin such as https://api.example.com (no path or trailing slash), or empty",
  );

const ConfigSchema = z
  .object({
    ENVIRONMENT: z.enum(["local", "staging", "production"]),
    /** How long a key stays banned after hammering while throttled. */
    BAN_MINUTES: z.coerce.number().int().min(1).max(1440).default(15),
    /** One JSON line per request ("on") or none ("off"). */
    ACCESS_LOG: z.enum(["on", "off"]).default("on"),
    CORS_ORIGINS: origins,
    PUBLIC_ORIGIN: publicOrigin,
    /**
     * Part of every key of the cache of full pages and found pets (db/immutable-reads.ts). Pets are
     * never changed by the API; an operator who edits or deletes pets by hand bumps it (any new
     * value) and redeploys, and no answer cached before is served again.
     */
    PAGE_CACHE_EPOCH: z.string().trim().min(1).max(64).default("1"),
    /**
     * Measurement aid for `npm run bench` only (lib/simulated-network.ts): a simulated round trip
     * around every QuotaLimiter call and every D1 query. 0 (off) in every environment; refused in
     * production.
     */
    BENCH_LIMITER_RTT_MS: z.coerce.number().int().min(0).max(10_000).default(0),
    BENCH_D1_RTT_MS: z.coerce.number().int().min(0).max(10_000).default(0),
    ADMIN_TOKEN: secret,
    CURSOR_SECRET: secret,
  })
  .refine(
    (c) =>
      c.ENVIRONMENT !== "production" || (c.BENCH_LIMITER_RTT_MS === 0 && c.BENCH_D1_RTT_MS === 0),
    { message: "BENCH_*_RTT_MS slow every request down on purpose; they must be 0 in production" },
  );

/** The service's settings, validated: read them from here, never from `env` directly. */
export type Config = z.infer<typeof ConfigSchema>;

/** A missing or invalid setting: the service answers 500 and logs which one. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

// One parse per env object (an isolate keeps its env; tests swap in their own).
const parsed = new WeakMap<object, Config | ConfigError>();
// Each distinct problem is logged once per isolate, not on every request that meets it.
const logged = new Set<string>();

function logOnce(problem: string): void {
  if (logged.has(problem)) return;
  logged.add(problem);
  log("error", "invalid configuration", { problem });
}

/** The validated settings of `env`, parsed once per isolate; throws ConfigError if any is invalid. */
export function configOrThrow(env: Env): Config {
  let result = parsed.get(env);
  if (!result) {
    const check = ConfigSchema.safeParse(env);
    result = check.success ? check.data : new ConfigError(describe(check.error));
    if (result instanceof ConfigError) logOnce(result.message);
    parsed.set(env, result);
  }
  if (result instanceof ConfigError) throw result;
  return result;
}

/** A secret the operation cannot do without; throws ConfigError (and logs it) when unset. */
export function secretOrThrow(config: Config, name: "ADMIN_TOKEN" | "CURSOR_SECRET"): string {
  const value = config[name];
  if (value) return value;
  const problem = `${name} is not set: run \`wrangler secret put ${name} --env …\` (locally: .dev.vars)`;
  logOnce(problem);
  throw new ConfigError(problem);
}

function describe(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
}
