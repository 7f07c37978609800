import type { Context } from "hono";
import { wrapTime } from "hono/timing";
import type { ApiKeyVariables } from "../../auth/api-key";
import { clock } from "../../lib/clock";
import { sha256Hex } from "../../lib/crypto";
import { ApiError } from "../../lib/errors";
import type { EnvWith } from "../../lib/hono-env";
import { IDEMPOTENCY_TTL_MS, type StoredResponse } from "../../objects/idempotency-table";
import { QuotaLimiterClient } from "../../objects/quota-limiter-client";

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
export async function createIdempotently<T, E extends EnvWith<ApiKeyVariables>>(
  c: Context<E>,
  idempotencyKey: string,
  request: unknown,
  create: (ref: string, notBefore: number) => Promise<Created<T>>,
): Promise<Created<T>> {
  const keyId = c.var.apiKey.id;
  const fingerprint = await sha256Hex(JSON.stringify(request));
  const records = new QuotaLimiterClient(c.env.QUOTA, keyId);
  const claim = await wrapTime(
    c,
    "idempotency",
    records.claimIdempotencyKey(idempotencyKey, fingerprint),
  );
  if (claim?.state === "mismatch") {
    const message =
      "This Idempotency-Key was used with a different request body; use a new key for a new request.";
    throw new ApiError("idempotency_key_reused", message);
  }
  if (claim?.state === "in_flight") {
    const message =
      "A request with this Idempotency-Key is still being processed; retry after it completes.";
    throw new ApiError("idempotency_key_in_flight", message, { "Retry-After": "1" });
  }
  if (claim?.state === "replay") {
    const { body, location } = claim.response;
    return { body: JSON.parse(body) as T, location: location ?? "", replayed: true };
  }

  const ref = `${keyId}:${await sha256Hex(idempotencyKey)}:${fingerprint}`;
  let outcome: Created<T>;
  try {
    outcome = await create(ref, clock.now() - IDEMPOTENCY_TTL_MS);
  } catch (err) {
    await records.releaseIdempotencyKey(idempotencyKey);
    throw err;
  }
  const stored: StoredResponse = {
    status: 201,
    body: JSON.stringify(outcome.body),
    location: outcome.location,
  };
  if (claim) await records.completeIdempotencyKey(idempotencyKey, stored);
  return outcome;
}
