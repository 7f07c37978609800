import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { wrapTime } from "hono/timing";
import { findKeyByHash, type KeyMatch, type KeyRecord, keyStatus, secretStatus } from "../db/keys";
import { runAfterResponse } from "../lib/after-response";
import { clientAddress } from "../lib/client-address";
import { clock } from "../lib/clock";
import { keyTagSecretsAccepted } from "../lib/config";
import { sha256Hex } from "../lib/crypto";
import { ApiError } from "../lib/errors";
import type { BaseEnv, EnvWith } from "../lib/hono-env";
import { log } from "../lib/log";
import {
  type AdmitResult,
  authenticateAndAdmitInLocation,
  authenticateInLocation,
  type LocationAuthentication,
  locationOf,
  type RequestLocation,
} from "../objects/quota-holder-client";
import { newAdmissionId } from "../quota/lease-messages";
import { credentialsError, parseAuthorization } from "./authorization-header";
import { failedGuess, isRefused } from "./failed-auth";
import { cachedKey, cacheKey, forgetKey, refreshCachedKey } from "./key-cache";
import { hasGenuineTag, keyShapeOf } from "./key-format";

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
  /** The SHA-256 of the secret it authenticated with (to read the key again by, see `reauthenticateOrThrow`). */
  apiKeyHash: string;
  /**
   * Set by `authenticateAndAdmit`: the request's admission id, sent with every attempt to decide
   * it (quota/lease-messages.ts), so the tier that decided it counts it once.
   */
  admissionId?: string;
  /**
   * Set by `authenticateAndAdmit` when the key's location holder decided the request along with
   * authenticating it (counted there): middleware/enforce-quota.ts then asks for no decision.
   */
  admission?: AdmitResult;
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
function whySecretUnusable(match: KeyMatch, now: number): string | null {
  const status = secretStatus(match, now);
  return status === "active" ? null : KEY_PROBLEMS[status];
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

/** How a cold isolate asks the key's location holder: to authenticate only, or to decide too. */
type AskHolder = (
  location: RequestLocation,
  keyId: string,
  hash: string,
) => Promise<LocationAuthentication>;

/** The key a token found (by its SHA-256 `hash`), and the decision its location holder made with it, if any. */
interface Found {
  match: KeyMatch;
  hash: string;
  admission: AdmitResult | null;
}

/**
 * The key for `token`: from this isolate's cache when warm (re-read after the response when the
 * entry is getting old); else, for a token that names its key (auth/key-format.ts), from the
 * key's holder in this location after checking the token's tag here (a wrong tag: no call at
 * all); else from D1. Null for a token that matches no key, and for refused clients.
 */
async function lookUp<E extends BaseEnv>(
  c: Context<E>,
  token: string,
  askHolder: AskHolder,
): Promise<Found | null> {
  const shape = keyShapeOf(token);
  if (!shape) return null;
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
    return { match: cached.match, hash, admission: null };
  }
  if (isRefused(clientAddress(c.req.header("CF-Connecting-IP")), now)) return null;
  const tagSecrets = keyTagSecretsAccepted(c.var.config);
  if (shape.keyId !== null && tagSecrets.length > 0) {
    if (!(await hasGenuineTag(tagSecrets, shape))) return null;
    const location = locationOf(c.req.raw, c.env.QUOTA_HOLDER);
    const said = location ? await askHolder(location, shape.keyId, hash) : null;
    if (said?.outcome === "unknown") return null;
    if (said?.outcome === "found") {
      // Kept as long as a record read when the holder read its copy: no copy outlives that.
      cacheKey(hash, said.match, now, now - said.copyAgeMs);
      return { match: said.match, hash, admission: said.admission };
    }
  }
  const match = await findKeyByHash(c.env.DB, hash);
  if (match) cacheKey(hash, match, now);
  return match && { match, hash, admission: null };
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
  await authenticateOrThrow(c, authenticateInLocation);
  await next();
});

/**
 * `authenticate`, for requests the quota decides (middleware/enforce-quota.ts comes next): on a
 * cold isolate, the key's location holder both authenticates a token that names its key and
 * decides the request, in one local hop, and sets `admission`.
 */
export const authenticateAndAdmit = createMiddleware<EnvWith<ApiKeyVariables>>(async (c, next) => {
  // Made here, never taken from the client: a repeated id is answered without being counted.
  const admissionId = newAdmissionId(clock.now());
  c.set("admissionId", admissionId);
  const admission = await authenticateOrThrow(c, (location, keyId, hash) =>
    authenticateAndAdmitInLocation(location, keyId, hash, admissionId),
  );
  if (admission) c.set("admission", admission);
  await next();
});

/** Sets `apiKey` (or throws the 401/429); returns the decision the holder made with it, if any. */
async function authenticateOrThrow(
  c: Context<EnvWith<ApiKeyVariables>>,
  askHolder: AskHolder,
): Promise<AdmitResult | null> {
  const credentials = parseAuthorization(c.req.header("Authorization"));
  if (credentials.kind !== "bearer")
    throw credentialsError(credentials, { realm: REALM, secretName: "API key" });
  const found = await wrapTime(c, "auth", lookUp(c, credentials.token, askHolder));
  if (!found) throw await unknownKeyFailure(c);
  const problem = whySecretUnusable(found.match, clock.now());
  if (problem) throw unusableKeyError(problem);
  c.set("apiKey", found.match.record);
  c.set("apiKeyHash", found.hash);
  return found.admission;
}

/**
 * Reads the key this request authenticated with again, by its secret's hash, when a tier said
 * this isolate's copy is older than the key's object's policy (a change made elsewhere): caches
 * the key as D1 has it now in place of every older copy, and sets `apiKey` to it; or throws the
 * 401 the secret now earns (a roll with no grace left, an expiry moved earlier, a revocation, a
 * disabling). Throws what D1 throws.
 */
export async function reauthenticateOrThrow<V extends ApiKeyVariables>(
  c: Context<EnvWith<V>>,
): Promise<KeyRecord> {
  const hash = c.var.apiKeyHash;
  const match = await findKeyByHash(c.env.DB, hash);
  const now = clock.now();
  forgetKey(c.var.apiKey.id);
  if (!match) throw unusableKeyError(KEY_PROBLEMS.unknown);
  cacheKey(hash, match, now);
  const problem = whySecretUnusable(match, now);
  if (problem) throw unusableKeyError(problem);
  c.set("apiKey", match.record);
  return match.record;
}
