import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { wrapTime } from "hono/timing";
import { findKeyByHash, type KeyRecord, keyStatus } from "../db/keys";
import { clientAddress } from "../lib/client-address";
import { clock } from "../lib/clock";
import { sha256Hex } from "../lib/crypto";
import type { BaseEnv, EnvWith } from "../lib/hono-env";
import { authFailure, isRefused } from "./failed-auth";
import { cachedKey, cacheKey } from "./key-cache";
import { bearerToken, looksLikeApiKey } from "./key-format";

const REALM = 'Bearer realm="animal-store"';

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

/** 401 (or 429 for a client that keeps failing) for an API request that did not authenticate. */
export function apiAuthFailure<E extends BaseEnv>(
  c: Context<E>,
  message: string,
  { tokenGiven }: { tokenGiven: boolean },
): Promise<Error> {
  const challenge = tokenGiven ? `${REALM}, error="invalid_token"` : REALM;
  return authFailure(c.env, clientAddress(c.req.header("CF-Connecting-IP")), message, challenge);
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
  const token = bearerToken(c.req.header("Authorization"));
  const record = token ? await wrapTime(c, "auth", lookUp(c, token)) : null;
  const problem = token
    ? whyKeyUnusable(record, clock.now())
    : "Missing API key: send Authorization: Bearer <API key>.";
  if (problem || !record) {
    throw await apiAuthFailure(c, problem ?? KEY_PROBLEMS.unknown, { tokenGiven: token !== null });
  }
  c.set("apiKey", record);
  await next();
});
