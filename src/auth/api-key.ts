import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { wrapTime } from "hono/timing";
import { findKeyByHash, type KeyRecord, keyStatus } from "../db/keys";
import { clientAddress } from "../lib/client-address";
import { clock } from "../lib/clock";
import { sha256Hex } from "../lib/crypto";
import { ApiError } from "../lib/errors";
import type { BaseEnv, EnvWith } from "../lib/hono-env";
import { credentialsError, parseAuthorization } from "./authorization-header";
import { failedGuess, isRefused } from "./failed-auth";
import { cachedKey, cacheKey } from "./key-cache";
import { looksLikeApiKey } from "./key-format";

const REALM = "animal-store";
const INVALID_TOKEN_CHALLENGE = `Bearer realm="${REALM}", error="invalid_token"`;

export const KEY_PROBLEMS = {
  unknown: "The API key is not valid.",
  revoked: "The API key has been revoked.",
  expired: "The API key has expired.",
} as const;

/** Set by `authenticate`: the key the request authenticated with. */
export interface ApiKeyVariables {
  apiKey: KeyRecord;
}

/** Why `record` may not be used now, or null if it may. */
export function whyKeyUnusable(record: KeyRecord | null, now: number): string | null {
  if (!record) return KEY_PROBLEMS.unknown;
  const status = keyStatus(record, now);
  return status === "active" ? null : KEY_PROBLEMS[status];
}

/**
 * 401 for a key the service knows but may not use now (revoked, expired). Not a guess, so the
 * client's failed-authentication shield does not count it: one stale client behind a shared
 * address must not lock everyone else there out.
 */
export function unusableKeyError(problem: string): ApiError {
  return new ApiError("unauthorized", problem, { "WWW-Authenticate": INVALID_TOKEN_CHALLENGE });
}

/**
 * 401 for a token that matches no key: a guess, counted in the client's shield (429 once the
 * client has guessed too often this minute).
 */
function unknownKeyFailure<E extends BaseEnv>(c: Context<E>): Promise<ApiError> {
  const client = clientAddress(c.req.header("CF-Connecting-IP"));
  return failedGuess(c.env, client, KEY_PROBLEMS.unknown, INVALID_TOKEN_CHALLENGE);
}

/** The key for `token`: from this isolate's cache when warm, else from D1 (none for refused clients). */
async function lookUp<E extends BaseEnv>(c: Context<E>, token: string): Promise<KeyRecord | null> {
  if (!looksLikeApiKey(token)) return null;
  const now = clock.now();
  const hash = await sha256Hex(token);
  const cached = cachedKey(hash, now);
  if (cached) return cached;
  if (isRefused(clientAddress(c.req.header("CF-Connecting-IP")), now)) return null;
  const record = await findKeyByHash(c.env.DB, hash);
  if (record) cacheKey(hash, record, now);
  return record;
}

/**
 * Requires `Authorization: Bearer <API key>` and sets `apiKey`; runs before any parameter or
 * body validation, so an unauthenticated request learns nothing about them.
 *
 * @example
 * ```ts
 * const app = new Hono<BaseEnv>();
 * app.use("/v1/*", authenticate);
 * app.get("/v1/whoami", (c) => c.text(c.var.apiKey.id));
 * ```
 */
export const authenticate = createMiddleware<EnvWith<ApiKeyVariables>>(async (c, next) => {
  const credentials = parseAuthorization(c.req.header("Authorization"));
  if (credentials.kind !== "bearer")
    throw credentialsError(credentials, { realm: REALM, secretName: "API key" });
  const record = await wrapTime(c, "auth", lookUp(c, credentials.token));
  if (!record) throw await unknownKeyFailure(c);
  const problem = whyKeyUnusable(record, clock.now());
  if (problem) throw unusableKeyError(problem);
  c.set("apiKey", record);
  await next();
});
