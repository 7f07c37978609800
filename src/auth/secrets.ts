import { toHex } from "../encoding";

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

export async function sha256Hex(text: string): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** Compares two secrets in constant time (hashing first makes the lengths equal). */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(given)),
    crypto.subtle.digest("SHA-256", encoder.encode(expected)),
  ]);
  return crypto.subtle.timingSafeEqual(a, b);
}

// 43 base62 characters carry 256 bits: the 32 random bytes the key format promises.
const KEY_SECRET_LENGTH = 43;
const KEY_PATTERN = /^pet_(live|test)_[0-9A-Za-z]{43}$/;

export function keyPrefixFor(environment: string): string {
  return environment === "production" ? "pet_live_" : "pet_test_";
}

export function generateApiKey(environment: string): { key: string; displayPrefix: string } {
  const key = keyPrefixFor(environment) + randomBase62(KEY_SECRET_LENGTH);
  return { key, displayPrefix: key.slice(0, keyPrefixFor(environment).length + 4) };
}

/** Cheap shape check so malformed tokens never reach the database. */
export function looksLikeApiKey(token: string): boolean {
  return KEY_PATTERN.test(token);
}

/** The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), or null. */
export function bearerToken(header: string | undefined): string | null {
  return header?.match(/^Bearer +(\S+) *$/i)?.[1] ?? null;
}
