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

const sha256 = (text: string) => crypto.subtle.digest("SHA-256", encoder.encode(text));

export async function sha256Hex(text: string): Promise<string> {
  return toHex(await sha256(text));
}

/** Compares two secrets in constant time (hashing first makes the lengths equal). */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(given), sha256(expected)]);
  return crypto.subtle.timingSafeEqual(a, b);
}

// 43 base62 characters carry 256 bits: the 32 random bytes the key format promises.
const KEY_SECRET_LENGTH = 43;
const LIVE_PREFIX = "pet_live_";
const TEST_PREFIX = "pet_test_";
const KEY_PATTERN = new RegExp(`^(${LIVE_PREFIX}|${TEST_PREFIX})[0-9A-Za-z]{${KEY_SECRET_LENGTH}}$`);

export function generateApiKey(environment: string): { key: string; displayPrefix: string } {
  const prefix = environment === "production" ? LIVE_PREFIX : TEST_PREFIX;
  const key = prefix + randomBase62(KEY_SECRET_LENGTH);
  return { key, displayPrefix: key.slice(0, prefix.length + 4) };
}

/** Cheap shape check so malformed tokens never reach the database. */
export function looksLikeApiKey(token: string): boolean {
  return KEY_PATTERN.test(token);
}

/** The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), or null. */
export function bearerToken(header: string | undefined): string | null {
  return header?.match(/^Bearer +(\S+) *$/i)?.[1] ?? null;
}
