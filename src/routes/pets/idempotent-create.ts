import type { Context } from "hono";
import { wrapTime } from "hono/timing";
import type { ApiKeyVariables } from "../../auth/api-key";
import { createPetIdempotently } from "../../db/pets";
import { clock, DAY_MS } from "../../lib/clock";
import { sha256Hex } from "../../lib/crypto";
import { ApiError } from "../../lib/errors";
import type { EnvWith } from "../../lib/hono-env";
import type { D1SessionVariables } from "../../middleware/d1-session";
import type { NewPet, Pet } from "../../schemas/pets";

/** An Idempotency-Key answers retries for 24 hours; then the same key makes a new pet. */
export const IDEMPOTENCY_TTL_MS = DAY_MS;

export interface IdempotentOutcome {
  pet: Pet;
  /** True when this answers a retry with the pet the first request made. */
  replayed: boolean;
}

/**
 * Creates a pet under an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header), scoped to
 * the API key, in one D1 batch: the record (key, fingerprint, pet id, expiry) is written in the
 * same transaction as the pet, so a retry either finds both or neither. The fingerprint is of the
 * validated request, so key order and whitespace do not matter. Throws 422 when the key was used
 * with another body.
 */
export async function createIdempotentlyOrThrow(
  c: Context<EnvWith<ApiKeyVariables & D1SessionVariables>>,
  idempotencyKey: string,
  pet: NewPet,
): Promise<IdempotentOutcome> {
  const [idemKeyHash, fingerprint] = await Promise.all([
    sha256Hex(idempotencyKey),
    sha256Hex(JSON.stringify(pet)),
  ]);
  const result = await wrapTime(
    c,
    "db",
    createPetIdempotently(c.var.d1.session, pet, {
      keyId: c.var.apiKey.id,
      idemKeyHash,
      fingerprint,
      now: clock.now(),
      ttlMs: IDEMPOTENCY_TTL_MS,
    }),
  );
  if (result.outcome === "key_reused") {
    const message =
      "This Idempotency-Key was used with a different request body; use a new key for a new request.";
    throw new ApiError("idempotency_key_reused", message);
  }
  return { pet: result.pet, replayed: result.outcome === "replayed" };
}
