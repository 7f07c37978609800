import type { Context, MiddlewareHandler } from "hono";
import { endTime, startTime } from "hono/timing";
import type { AppEnv } from "../app-env";
import { clock } from "../clock";
import { findKeyByHash, type KeyRecord } from "../db/keys";
import { ApiError } from "../errors";
import { rateLimitHeaders } from "../quota/headers";
import { cacheKey, cachedKey } from "./key-cache";
import { looksLikeApiKey, sha256Hex } from "./secrets";

const REALM = 'Bearer realm="animal-store"';

// Clients the shield has already refused, until their window resets: their uncached keys are
// not looked up in D1 at all, so a guessing client cannot load the database. Bounded, like the key cache.
const refusedClients = new Map<string, number>();
const MAX_REFUSED_CLIENTS = 10_000;

function isRefused(client: string, now: number): boolean {
  const until = refusedClients.get(client);
  if (until === undefined) return false;
  if (until > now) return true;
  refusedClients.delete(client);
  return false;
}

function refuse(client: string, until: number): void {
  if (refusedClients.size >= MAX_REFUSED_CLIENTS) refusedClients.delete(refusedClients.keys().next().value!);
  refusedClients.set(client, until);
}

export function clientAddress(c: Context): string {
  return c.req.header("CF-Connecting-IP") ?? "127.0.0.1";
}

function bearerToken(header: string | undefined): string | null {
  const match = header?.match(/^Bearer +(\S+) *$/i);
  return match?.[1] ?? null;
}

async function lookUp(c: Context<AppEnv>, token: string, client: string): Promise<KeyRecord | null> {
  if (!looksLikeApiKey(token)) return null;
  const now = clock.now();
  const hash = await sha256Hex(token);
  const cached = cachedKey(hash, now);
  if (cached) return cached;
  if (isRefused(client, now)) return null;
  const record = await findKeyByHash(c.env.DB, hash);
  if (record) cacheKey(hash, record, now);
  return record;
}

function problemWith(record: KeyRecord | null, now: number): string | null {
  if (!record) return "The API key is not valid.";
  if (record.revokedAt !== null) return "The API key has been revoked.";
  if (record.expiresAt !== null && record.expiresAt <= now) return "The API key has expired.";
  return null;
}

/**
 * The error for a failed authentication: 401, or 429 once this client has failed too often.
 * Either carries the X-RateLimit-* headers of the client's failure window.
 */
export async function authFailure(c: Context<AppEnv>, message: string, tokenGiven: boolean): Promise<ApiError> {
  const client = clientAddress(c);
  const challenge = tokenGiven ? `${REALM}, error="invalid_token"` : REALM;
  try {
    const decision = await c.env.AUTH_SHIELD.getByName(client).recordFailure();
    const headers = rateLimitHeaders(decision);
    if (decision.outcome !== "allowed") {
      refuse(client, decision.retryAt ?? 0);
      return new ApiError("rate_limited", "Too many failed authentication attempts from this client; wait for Retry-After.", headers);
    }
    return new ApiError("unauthorized", message, { ...headers, "WWW-Authenticate": challenge });
  } catch (err) {
    console.warn(JSON.stringify({ level: "warn", msg: "auth shield unreachable; failing open", error: String(err) }));
    return new ApiError("unauthorized", message, { "WWW-Authenticate": challenge });
  }
}

/** Requires `Authorization: Bearer <API key>`; runs before any parameter or body validation. */
export const authenticate: MiddlewareHandler<AppEnv> = async (c, next) => {
  startTime(c, "auth");
  const token = bearerToken(c.req.header("Authorization"));
  const client = clientAddress(c);
  const record = token ? await lookUp(c, token, client) : null;
  endTime(c, "auth");
  const problem = token ? problemWith(record, clock.now()) : "Missing API key: send Authorization: Bearer <API key>.";
  if (problem || !record) throw await authFailure(c, problem ?? "The API key is not valid.", token !== null);
  c.set("apiKey", record);
  await next();
};
