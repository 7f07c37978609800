import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { wrapTime } from "hono/timing";
import { findKeyByHash, type KeyMatch, type KeyRecord, keyStatus } from "../db/keys";
import { runAfterResponse } from "../lib/after-response";
import { clientAddress } from "../lib/client-address";
import { clock } from "../lib/clock";
import { sha256Hex } from "../lib/crypto";
import { ApiError } from "../lib/errors";
import type { BaseEnv, EnvWith } from "../lib/hono-env";
import { log } from "../lib/log";
import { credentialsError, parseAuthorization } from "./authorization-header";
import { failedGuess, isRefused } from "./failed-auth";
import { cachedKey, cacheKey, refreshCachedKey } from "./key-cache";
import { looksLikeApiKey } from "./key-format";

const REALM = "animal-store";
const INVALID_TOKEN_CHALLENGE = `Bearer realm="${REALM}", error="invalid_token"`;

export const KEY_PROBLEMS = {
  unknown: "The API key is not valid.",
  revoked: "The API key has been revoked.",
  expired: "The API key has expired.",
  disabled: "The API key is disabled; the operator can enable it again.",
  rolled: "The API key was rolled and this secret's grace period is over; use the new secret.",
  retired:
    "The API key was rolled more than once since this secret was issued; use its current secret.",
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
 * Why the secret that found `match` may not be used now (a rolled secret past its grace period,
 * or one a later roll retired, too), or null.
 */
function whySecretUnusable(match: KeyMatch | null, now: number): string | null {
  const problem = whyKeyUnusable(match?.record ?? null, now);
  if (problem || !match || match.secret === "current") return problem;
  if (match.secret === "retired") return KEY_PROBLEMS.retired;
  const graceEnd = match.record.previousSecretExpiresAt;
  return graceEnd !== null && now < graceEnd ? null : KEY_PROBLEMS.rolled;
}

/**
 * 401 for a key the service knows but may not use now (revoked, disabled, expired, or a rolled
 * secret past its grace period or retired by a later roll). Not a guess, so the
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

/**
 * The key for `token`: from this isolate's cache when warm (re-read after the response when the
 * entry is getting old), else from D1 (none for refused clients).
 */
async function lookUp<E extends BaseEnv>(c: Context<E>, token: string): Promise<KeyMatch | null> {
  if (!looksLikeApiKey(token)) return null;
  const now = clock.now();
  const hash = await sha256Hex(token);
  const cached = cachedKey(hash, now);
  if (cached) {
    if (cached.wantsRefresh) {
      const refresh = refreshCachedKey(hash, () => findKeyByHash(c.env.DB, hash), clock.now);
      runAfterResponse(
        c,
        refresh.catch((err: unknown) => {
          log("warn", "key re-read failed; the cached record is used until it expires", {
            error: String(err),
          });
        }),
      );
    }
    return cached.match;
  }
  if (isRefused(clientAddress(c.req.header("CF-Connecting-IP")), now)) return null;
  const match = await findKeyByHash(c.env.DB, hash);
  if (match) cacheKey(hash, match, now);
  return match;
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
  const match = await wrapTime(c, "auth", lookUp(c, credentials.token));
  if (!match) throw await unknownKeyFailure(c);
  const problem = whySecretUnusable(match, clock.now());
  if (problem) throw unusableKeyError(problem);
  c.set("apiKey", match.record);
  await next();
});
