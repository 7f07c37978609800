import type { Context, MiddlewareHandler } from "hono";
import { wrapTime } from "hono/timing";
import type { AppEnv } from "../app-env";
import { clock } from "../clock";
import { findKeyByHash, keyStatus, type KeyRecord } from "../db/keys";
import { cacheKey, cachedKey } from "./key-cache";
import { bearerToken, looksLikeApiKey, sha256Hex } from "./secrets";
import { authFailure, clientAddress, isRefused } from "./shield";

const REALM = 'Bearer realm="animal-store"';

export const KEY_PROBLEMS = { revoked: "The API key has been revoked.", expired: "The API key has expired." } as const;

/** Why `record` may not be used now, or null if it may. */
export function problemWith(record: KeyRecord | null, now: number): string | null {
  if (!record) return "The API key is not valid.";
  const status = keyStatus(record, now);
  return status === "active" ? null : KEY_PROBLEMS[status];
}

/** 401 (or 429 for a client that keeps failing) for an API request that did not authenticate. */
export function apiAuthFailure(c: Context<AppEnv>, message: string, tokenGiven: boolean): Promise<Error> {
  return authFailure(c, clientAddress(c), message, tokenGiven ? `${REALM}, error="invalid_token"` : REALM);
}

/** The key for `token`: from this isolate's cache when warm, else from D1 (none for refused clients). */
async function lookUp(c: Context<AppEnv>, token: string): Promise<KeyRecord | null> {
  if (!looksLikeApiKey(token)) return null;
  const now = clock.now();
  const hash = await sha256Hex(token);
  const cached = cachedKey(hash, now);
  if (cached) return cached;
  if (isRefused(clientAddress(c), now)) return null;
  const record = await findKeyByHash(c.env.DB, hash);
  if (record) cacheKey(hash, record, now);
  return record;
}

/** Requires `Authorization: Bearer <API key>`; runs before any parameter or body validation. */
export const authenticate: MiddlewareHandler<AppEnv> = async (c, next) => {
  const token = bearerToken(c.req.header("Authorization"));
  const record = token ? await wrapTime(c, "auth", lookUp(c, token)) : null;
  const problem = token ? problemWith(record, clock.now()) : "Missing API key: send Authorization: Bearer <API key>.";
  if (problem || !record) throw await apiAuthFailure(c, problem ?? "The API key is not valid.", token !== null);
  c.set("apiKey", record);
  await next();
};
