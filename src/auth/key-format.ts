import { randomBase62, signedTag, TAG_BYTES, verifyTagUnderAny } from "../lib/crypto";
import { fromHex } from "../lib/encoding";
import {
  KEY_ID_LENGTH,
  KEY_ID_PART,
  KEY_ID_PATTERN,
  KEY_ID_PREFIX,
  SHOWN_SECRET_CHARACTERS,
} from "../schemas/keys";

// A key is `pet_live_` (production) or `pet_test_` (elsewhere), its secret, then its routing
// part: `pet_test_<secret>_<id>_<tag>`.
// - secret: 43 base62 characters, 256 random bits; the shown prefix is the environment's and
//   the secret's first 4 characters, as for keys issued before routing parts existed.
// - id: the key's id without its `key_` (20 base62 characters), so a Worker can route the
//   request to the key's location holder without reading D1 first.
// - tag: HMAC-SHA-256 of the key id under KEY_TAG_SECRET, truncated to 128 bits (32 hex
//   digits). A token whose tag is wrong was not issued here and is refused before any call.
// D1 stores the SHA-256 of the whole token, so a key authenticates by its hash whichever way it
// is routed. Keys issued before (no routing part) keep authenticating through D1.
const KEY_SECRET_LENGTH = 43;
const LIVE_PREFIX = "pet_live_";
const TEST_PREFIX = "pet_test_";
const KEY_PATTERN = new RegExp(
  `^(?:${LIVE_PREFIX}|${TEST_PREFIX})[0-9A-Za-z]{${KEY_SECRET_LENGTH}}` +
    `(?:_(${KEY_ID_PART})_([0-9a-f]{${TAG_BYTES * 2}}))?$`,
);

const encoder = new TextEncoder();

/** A new key id: `key_` and 20 base62 characters (119 random bits). */
export const newKeyId = (): string => KEY_ID_PREFIX + randomBase62(KEY_ID_LENGTH);

const tagOf = async (tagSecret: string, keyId: string): Promise<string> =>
  (await signedTag(tagSecret, encoder.encode(keyId))).toHex();

/**
 * A new secret for key `keyId` (a new key, or a roll), with its routing part tagged under
 * `tagSecret`, and the prefix shown for it.
 */
export async function generateApiKey(
  environment: string,
  keyId: string,
  tagSecret: string,
): Promise<{ key: string; displayPrefix: string }> {
  const prefix = environment === "production" ? LIVE_PREFIX : TEST_PREFIX;
  if (!KEY_ID_PATTERN.test(keyId)) throw new Error(`not a key id: ${keyId}`);
  const idPart = keyId.slice(KEY_ID_PREFIX.length);
  const secret = prefix + randomBase62(KEY_SECRET_LENGTH);
  const key = `${secret}_${idPart}_${await tagOf(tagSecret, keyId)}`;
  return { key, displayPrefix: key.slice(0, prefix.length + SHOWN_SECRET_CHARACTERS) };
}

/**
 * What a token's shape says: not a key at all (null: it never reaches the database), a key
 * without a routing part (`keyId` null: found through D1 by its hash), or a key that names its id
 * (its tag still to be checked, `hasGenuineTag`).
 */
export type KeyShape = { keyId: string; tag: string } | { keyId: null; tag: null };

export function keyShapeOf(token: string): KeyShape | null {
  const m = KEY_PATTERN.exec(token);
  if (!m) return null;
  return m[1] && m[2] ? { keyId: KEY_ID_PREFIX + m[1], tag: m[2] } : { keyId: null, tag: null };
}

/**
 * Whether a routed key's tag is its id's tag under one of `tagSecrets` (KEY_TAG_SECRET and,
 * during a rotation, the one before it), checked in constant time.
 */
export async function hasGenuineTag(
  tagSecrets: readonly string[],
  shape: { keyId: string; tag: string },
): Promise<boolean> {
  const tag = fromHex(shape.tag);
  return verifyTagUnderAny(tagSecrets, encoder.encode(shape.keyId), tag);
}
