import type { Context } from "hono";
import { wrapTime } from "hono/timing";
import type { AppEnv } from "./app-env";
import { sha256Hex } from "./auth/secrets";
import { ApiError } from "./errors";
import { clock } from "./clock";
import { IDEMPOTENCY_TTL_MS, type Claim, type StoredResponse } from "./quota/idempotency-store";

export interface Created<T> {
  body: T;
  location: string;
  /** True when this answers a retry with the first request's stored answer. */
  replayed: boolean;
}

/**
 * Runs a create under an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header), scoped to
 * the API key. The fingerprint is of the validated request, so key order and whitespace do not
 * matter. `create` receives a reference that the data layer stores uniquely, so even a retry the
 * quota object could not answer (unreachable, or a claim taken over) never creates twice; the
 * reference lapses with the record, after 24 hours.
 */
export async function idempotent<T>(
  c: Context<AppEnv>,
  idempotencyKey: string,
  request: unknown,
  create: (ref: string, notBefore: number) => Promise<Created<T>>,
): Promise<Created<T>> {
  const keyId = c.get("apiKey").id;
  const fingerprint = await sha256Hex(JSON.stringify(request));
  const limiter = c.env.QUOTA.getByName(keyId);

  const claiming = limiter.claimIdempotencyKey(idempotencyKey, fingerprint).catch((err: unknown) => {
    console.warn(JSON.stringify({ level: "warn", msg: "idempotency records unreachable; relying on the database guard", keyId, error: String(err) }));
    return null;
  });
  const claim: Claim | null = await wrapTime<Claim | null>(c, "idempotency", claiming);
  if (claim?.state === "mismatch") throw new ApiError("idempotency_key_reused", "This Idempotency-Key was used with a different request body; use a new key for a new request.");
  if (claim?.state === "in_flight") throw new ApiError("idempotency_key_in_flight", "A request with this Idempotency-Key is still being processed; retry after it completes.", { "Retry-After": "1" });
  if (claim?.state === "replay") {
    const { body, location } = claim.response;
    return { body: JSON.parse(body) as T, location: location ?? "", replayed: true };
  }

  const ref = `${keyId}:${await sha256Hex(idempotencyKey)}:${fingerprint}`;
  let outcome: Created<T>;
  try {
    outcome = await create(ref, clock.now() - IDEMPOTENCY_TTL_MS);
  } catch (err) {
    await limiter.releaseIdempotencyKey(idempotencyKey).catch(() => undefined);
    throw err;
  }
  const stored: StoredResponse = { status: 201, body: JSON.stringify(outcome.body), location: outcome.location };
  if (claim) await limiter.completeIdempotencyKey(idempotencyKey, stored).catch(() => undefined);
  return outcome;
}
