import { fromBase64Url, toBase64Url } from "./encoding";

/**
 * Webhook signing secrets as D1 stores them: sealed with AES-256-GCM under WEBHOOK_ENCRYPTION_KEY
 * (a Worker secret, so a copy of the database alone signs nothing). The service must keep each
 * signing secret to sign with it, so it cannot hash it as it does a key's.
 *
 * A sealed secret is `aesgcm1.<key id>.<iv>.<ciphertext and tag>` (base64url parts): the key id
 * (8 characters of the key's SHA-256) says which key sealed it, so during a rotation of the key
 * the one before (WEBHOOK_ENCRYPTION_KEY_PREVIOUS) still opens what it sealed, and the hourly
 * pass finds what is not sealed under the current key yet. The endpoint's id is the additional
 * data: a sealed secret opens only on the endpoint it was sealed for. A stored value that is not
 * sealed (`whsec_…`, written before secrets were sealed) is used as it is until the pass seals it.
 */
export const SEALED_PREFIX = "aesgcm1.";

const IV_BYTES = 12;
const encoder = new TextEncoder();

/** One AES-GCM key with its id. */
interface SealingKey {
  id: string;
  key: CryptoKey;
}

/** The keys that open stored secrets: the current one (which seals), then the one before it. */
export interface SecretBox {
  current: SealingKey;
  all: SealingKey[];
}

async function sealingKey(raw: Uint8Array): Promise<SealingKey> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return { id: toBase64Url(digest.slice(0, 6)), key };
}

/** The box of the current key's bytes and, during a rotation, the previous key's. */
export async function secretBoxOf(current: Uint8Array, previous?: Uint8Array): Promise<SecretBox> {
  const keys = await Promise.all([current, ...(previous ? [previous] : [])].map(sealingKey));
  return { current: keys[0]!, all: keys };
}

/** The prefix every secret sealed under the box's current key starts with. */
export const currentSealPrefix = (box: SecretBox) => `${SEALED_PREFIX}${box.current.id}.`;

/** `secret` sealed under the current key, for endpoint `endpointId` only. */
export async function sealSecret(
  box: SecretBox,
  endpointId: string,
  secret: string,
): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: encoder.encode(endpointId) },
    box.current.key,
    encoder.encode(secret),
  );
  return `${currentSealPrefix(box)}${toBase64Url(iv)}.${toBase64Url(new Uint8Array(sealed))}`;
}

/** Why a stored secret cannot be opened: sealed under a key the box does not hold, or altered. */
class UnopenableSecretError extends Error {
  override name = "UnopenableSecretError";
}

/**
 * The secret a stored value holds: opened when sealed, as it is when it was stored before
 * sealing. Throws UnopenableSecretError when it was sealed under a key the box does not hold,
 * for another endpoint, or altered.
 */
export async function openSecretOrThrow(
  box: SecretBox,
  endpointId: string,
  stored: string,
): Promise<string> {
  if (!stored.startsWith(SEALED_PREFIX)) return stored;
  const [keyId, iv, sealed, ...rest] = stored.slice(SEALED_PREFIX.length).split(".");
  const key = box.all.find((k) => k.id === keyId);
  if (!key) throw new UnopenableSecretError(`sealed under an unknown key (${keyId})`);
  if (!iv || !sealed || rest.length) throw new UnopenableSecretError("not a sealed secret");
  try {
    const opened = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: fromBase64Url(iv), additionalData: encoder.encode(endpointId) },
      key.key,
      fromBase64Url(sealed),
    );
    return new TextDecoder().decode(opened);
  } catch {
    throw new UnopenableSecretError(
      `does not open under its key (${keyId}): altered, or sealed for another endpoint`,
    );
  }
}
