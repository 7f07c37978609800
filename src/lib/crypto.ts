import { toHex } from "./encoding";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const encoder = new TextEncoder();

/** `length` base62 characters from the CSPRNG, unbiased (bytes ≥ 248 are rejected). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

const sha256 = (text: string) => crypto.subtle.digest("SHA-256", encoder.encode(text));

export async function sha256Hex(text: string): Promise<string> {
  return toHex(await sha256(text));
}

/** Compares two secrets in constant time (hashing first makes the lengths equal). */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(given), sha256(expected)]);
  return crypto.subtle.timingSafeEqual(a, b);
}

const hmacKeys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = hmacKeys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey(
      "raw",
      encoder.encode(secret),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    hmacKeys.set(secret, key);
  }
  return key;
}

/**
 * Bytes in the tags of this API's opaque tokens (page cursors, D1 bookmarks): HMAC-SHA-256
 * truncated to 128 bits. Part of their wire format: tokens already handed out carry it.
 */
export const TAG_BYTES = 16;

/**
 * The tag that shows this API issued `payload`: its HMAC-SHA-256 under `secret`, truncated to
 * TAG_BYTES.
 */
export async function signedTag(secret: string, payload: Uint8Array): Promise<Uint8Array> {
  const tag = await crypto.subtle.sign("HMAC", await hmacKey(secret), payload);
  return new Uint8Array(tag).slice(0, TAG_BYTES);
}

/**
 * Whether `tag` is `payload`'s signedTag under `secret`, compared in constant time. A tag of
 * another length is false, not an error.
 */
export async function verifyTag(
  secret: string,
  payload: Uint8Array,
  tag: Uint8Array,
): Promise<boolean> {
  const expected = await signedTag(secret, payload);
  return tag.length === expected.length && crypto.subtle.timingSafeEqual(expected, tag);
}

/**
 * Whether `tag` is `payload`'s signedTag under any of `secrets` (during a rotation: the new secret
 * and the one before it). Each is checked, so the time taken does not say which one matched.
 */
export async function verifyTagUnderAny(
  secrets: readonly string[],
  payload: Uint8Array,
  tag: Uint8Array,
): Promise<boolean> {
  const matches = await Promise.all(secrets.map((secret) => verifyTag(secret, payload, tag)));
  return matches.includes(true);
}
