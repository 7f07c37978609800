import { randomBase62 } from "../lib/crypto";

// 43 base62 characters carry 256 bits: the 32 random bytes the key format promises.
const KEY_SECRET_LENGTH = 43;
const LIVE_PREFIX = "pet_live_";
const TEST_PREFIX = "pet_test_";
const KEY_PATTERN = new RegExp(
  `^(${LIVE_PREFIX}|${TEST_PREFIX})[0-9A-Za-z]{${KEY_SECRET_LENGTH}}$`,
);

export function generateApiKey(environment: string): { key: string; displayPrefix: string } {
  const prefix = environment === "production" ? LIVE_PREFIX : TEST_PREFIX;
  const key = prefix + randomBase62(KEY_SECRET_LENGTH);
  return { key, displayPrefix: key.slice(0, prefix.length + 4) };
}

/** Cheap shape check so malformed tokens never reach the database. */
export function looksLikeApiKey(token: string): boolean {
  return KEY_PATTERN.test(token);
}
