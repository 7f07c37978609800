import { z } from "zod";
import { log } from "./log";
import { type SecretBox, secretBoxOf } from "./sealed-secret";
import { WEBHOOK_RETRY_DELAYS_SECONDS } from "./webhook-events";

/** Whether `s` is exactly an http(s) origin: scheme, host and port, nothing more. */
function isHttpOrigin(s: string): boolean {
  if (!URL.canParse(s)) return false;
  const url = new URL(s);
  return /^https?:$/.test(url.protocol) && url.origin === s;
}

/** An empty secret is no secret: treat it as unset. */
const secret = z
  .string()
  .optional()
  .transform((s) => (s ? s : undefined));

/** A secret that keys a MAC: unset, or at least 32 characters (`openssl rand -base64 32`). */
const macSecret = secret.pipe(
  z.string().min(32, "must have at least 32 characters (openssl rand -base64 32)").optional(),
);

/** Whether `s` is the padded base64 of exactly 32 bytes, an AES-256 key. */
function isBase64Key(s: string): boolean {
  if (!/^[A-Za-z0-9+/]{43}=$/.test(s)) return false;
  return Uint8Array.fromBase64(s).length === 32;
}

/** An AES-256 key: unset, or the base64 of 32 bytes (`openssl rand -base64 32`). */
const aesKey = secret.pipe(
  z
    .string()
    .refine(isBase64Key, "must be the base64 of 32 bytes (openssl rand -base64 32)")
    .optional(),
);

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
  .pipe(z.array(z.url({ protocol: /^https?$/ }).refine(isHttpOrigin, "must be an origin")));

/**
 * What an admin token may do: "full" (every operation) or "read" (only the operations that change
 * nothing: key views, usage and the audit trail).
 */
export type AdminAccess = "full" | "read";

/** One operator's admin token; `name` is the actor the audit trail records. */
export interface AdminToken {
  name: string;
  token: string;
  access: AdminAccess;
}

/**
 * `ADMIN_TOKENS="alice:…,ci:…"`: named admin tokens, all valid at once, so each operator (or CI)
 * is told apart in the audit trail and a token can be replaced without downtime (add the new
 * one, move over, remove the old one). Names are short identifiers; tokens at least 16 characters.
 */
const namedTokens = z
  .string()
  .default("")
  .transform((s) =>
    s
      .split(",")
      .map((entry) => entry.trim())
      .filter(Boolean)
      .map((entry) => {
        const colon = entry.indexOf(":");
        return colon < 0
          ? { name: entry, token: "" }
          : { name: entry.slice(0, colon).trim(), token: entry.slice(colon + 1).trim() };
      }),
  )
  .pipe(
    z.array(
      z.object({
        name: z
          .string()
          .regex(/^[A-Za-z0-9_.-]{1,64}$/, "each entry must be name:token, name of [A-Za-z0-9_.-]"),
        token: z.string().min(16, "each token must have at least 16 characters"),
      }),
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
    (s) => s === "" || isHttpOrigin(s),
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
    ADMIN_TOKEN: secret,
    ADMIN_TOKENS: namedTokens,
    /** Named read-only admin tokens, in ADMIN_TOKENS' form, for the people who only look. */
    ADMIN_READ_TOKENS: namedTokens,
    CURSOR_SECRET: secret,
    /**
     * The CURSOR_SECRET before a rotation: cursors and bookmarks signed with it are still accepted
     * (new ones are signed with CURSOR_SECRET). Removed once the cursors clients held have expired.
     */
    CURSOR_SECRET_PREVIOUS: secret,
    /**
     * Tags the key id inside every key issued (auth/key-format.ts), so a Worker routes a request to
     * the key's location holder without reading D1 and refuses a made-up key before any call. Keys
     * live for years, so it is its own secret, not CURSOR_SECRET. Unset: keys cannot be issued or
     * rolled, and every key authenticates through D1.
     */
    KEY_TAG_SECRET: macSecret,
    /**
     * The KEY_TAG_SECRET before a rotation: keys tagged under it still route without D1 (new and
     * rolled keys are tagged with KEY_TAG_SECRET). See docs/operations.md.
     */
    KEY_TAG_SECRET_PREVIOUS: macSecret,
    /**
     * Seals every webhook signing secret stored in D1 (AES-256-GCM, lib/sealed-secret.ts). Unset:
     * endpoints cannot be registered or rolled, nor deliveries signed. Rotation: docs/operations.md.
     */
    WEBHOOK_ENCRYPTION_KEY: aesKey,
    /**
     * The WEBHOOK_ENCRYPTION_KEY before a rotation: secrets sealed under it still open, and the
     * hourly pass seals them again under WEBHOOK_ENCRYPTION_KEY.
     */
    WEBHOOK_ENCRYPTION_KEY_PREVIOUS: aesKey,
    /**
     * "on" lets webhook endpoints be http://localhost (127.0.0.1, [::1]) receivers, for developing
     * with `npm run webhooks:listen`; refused outside ENVIRONMENT=local (lib/webhook-url.ts).
     */
    WEBHOOK_LOCAL_RECEIVERS: z.enum(["on", "off"]).default("off"),
    /**
     * The webhook retry delays in seconds, comma-separated, one per retry; "" (the default): the
     * service's schedule, WEBHOOK_RETRY_DELAYS_SECONDS. Another schedule (a fast one, to watch
     * retries locally) only where ENVIRONMENT is local.
     */
    WEBHOOK_RETRY_DELAYS: z
      .string()
      .default("")
      .transform((s) =>
        s.trim() === ""
          ? [...WEBHOOK_RETRY_DELAYS_SECONDS]
          : s.split(",").map((d) => Number(d.trim())),
      )
      .pipe(
        z
          .array(z.number().int().min(0).max(43_200), {
            error: "must be whole seconds from 0 to 43200, comma-separated",
          })
          .length(
            WEBHOOK_RETRY_DELAYS_SECONDS.length,
            `must list ${WEBHOOK_RETRY_DELAYS_SECONDS.length} delays (the queue's max_retries)`,
          ),
      ),
  })
  .refine((c) => c.WEBHOOK_LOCAL_RECEIVERS === "off" || c.ENVIRONMENT === "local", {
    message:
      "may be on only where ENVIRONMENT is local (a deployed service delivers to public hosts only)",
    path: ["WEBHOOK_LOCAL_RECEIVERS"],
  })
  .refine(
    (c) =>
      c.ENVIRONMENT === "local" ||
      c.WEBHOOK_RETRY_DELAYS.join() === WEBHOOK_RETRY_DELAYS_SECONDS.join(),
    {
      message: "may be set only where ENVIRONMENT is local (deployments retry over a day)",
      path: ["WEBHOOK_RETRY_DELAYS"],
    },
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

/** The actor name the audit trail records for the single `ADMIN_TOKEN`. */
const DEFAULT_ADMIN_NAME = "admin";

/**
 * Every valid admin token with its name and access: `ADMIN_TOKENS` and `ADMIN_TOKEN` (as "admin")
 * with full access, `ADMIN_READ_TOKENS` read-only. Throws ConfigError (and logs it) when there is
 * no full-access token, or when a name or a token appears twice (the audit trail could not tell
 * the operators apart, nor a token's access be known).
 */
export function adminTokensOrThrow(config: Config): AdminToken[] {
  let result = adminTokensByConfig.get(config);
  if (!result) {
    result = adminTokensOf(config);
    adminTokensByConfig.set(config, result);
  }
  if (result instanceof ConfigError) throw result;
  return result;
}

// Worked out once per parsed configuration, not on every admin request.
const adminTokensByConfig = new WeakMap<Config, AdminToken[] | ConfigError>();

function adminTokensOf(config: Config): AdminToken[] | ConfigError {
  const tokens: AdminToken[] = config.ADMIN_TOKENS.map((t) => ({ ...t, access: "full" }));
  if (config.ADMIN_TOKEN)
    tokens.push({ name: DEFAULT_ADMIN_NAME, token: config.ADMIN_TOKEN, access: "full" });
  const fullAccessTokens = tokens.length;
  tokens.push(...config.ADMIN_READ_TOKENS.map((t): AdminToken => ({ ...t, access: "read" })));
  let problem: string | null = null;
  if (!fullAccessTokens)
    problem =
      "neither ADMIN_TOKEN nor ADMIN_TOKENS is set: run `wrangler versions secret put ADMIN_TOKENS --env …` and deploy that version (locally: .dev.vars)";
  else if (new Set(tokens.map((t) => t.name)).size !== tokens.length)
    problem = `ADMIN_TOKENS, ADMIN_READ_TOKENS: each name may appear once ("${DEFAULT_ADMIN_NAME}" is ADMIN_TOKEN's)`;
  else if (new Set(tokens.map((t) => t.token)).size !== tokens.length)
    problem = "ADMIN_TOKENS, ADMIN_READ_TOKENS: two admin tokens are the same";
  if (problem) {
    logOnce(problem);
    return new ConfigError(problem);
  }
  return tokens;
}

/** A secret the operation cannot do without; throws ConfigError (and logs it) when unset. */
export function secretOrThrow(
  config: Config,
  name: "CURSOR_SECRET" | "KEY_TAG_SECRET" | "WEBHOOK_ENCRYPTION_KEY",
): string {
  const value = config[name];
  if (value) return value;
  const problem = `${name} is not set: run \`wrangler versions secret put ${name} --env …\` and deploy that version (locally: .dev.vars)`;
  logOnce(problem);
  throw new ConfigError(problem);
}

function describe(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
}

/**
 * The secrets page cursors and D1 bookmarks are accepted under: CURSOR_SECRET, which signs every
 * new one, then during a rotation CURSOR_SECRET_PREVIOUS, so the ones clients already hold keep
 * working until they are replaced. Throws ConfigError (and logs it) when CURSOR_SECRET is unset.
 */
export function cursorSecretsAcceptedOrThrow(config: Config): string[] {
  return currentThenPrevious(secretOrThrow(config, "CURSOR_SECRET"), config.CURSOR_SECRET_PREVIOUS);
}

/**
 * The secrets a key's routing tag is accepted under: KEY_TAG_SECRET, then during a rotation
 * KEY_TAG_SECRET_PREVIOUS. Empty when KEY_TAG_SECRET is unset (keys then authenticate through D1).
 */
export function keyTagSecretsAccepted(config: Config): string[] {
  const current = config.KEY_TAG_SECRET;
  return current ? currentThenPrevious(current, config.KEY_TAG_SECRET_PREVIOUS) : [];
}

/** A rotated secret's accepted values: the current one, then the previous one while it is set. */
const currentThenPrevious = (current: string, previous: string | undefined): string[] =>
  previous ? [current, previous] : [current];

// Imported once per parsed configuration (WebCrypto keys), not on every delivery.
const secretBoxes = new WeakMap<Config, Promise<SecretBox>>();

/**
 * The keys webhook signing secrets are sealed and opened with: WEBHOOK_ENCRYPTION_KEY, then
 * during a rotation WEBHOOK_ENCRYPTION_KEY_PREVIOUS. Throws ConfigError (and logs it) when
 * WEBHOOK_ENCRYPTION_KEY is unset.
 */
export function webhookSecretBoxOrThrow(config: Config): Promise<SecretBox> {
  const current = secretOrThrow(config, "WEBHOOK_ENCRYPTION_KEY");
  let box = secretBoxes.get(config);
  if (!box) {
    const previous = config.WEBHOOK_ENCRYPTION_KEY_PREVIOUS;
    box = secretBoxOf(
      Uint8Array.fromBase64(current),
      previous ? Uint8Array.fromBase64(previous) : undefined,
    );
    secretBoxes.set(config, box);
  }
  return box;
}
