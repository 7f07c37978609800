/**
 * Webhook signatures as the Standard Webhooks specification defines them: each delivery carries
 * `webhook-id` (the event id, the receiver's deduplication key), `webhook-timestamp` (Unix
 * seconds) and `webhook-signature`, a space-separated list of `v1,<base64 HMAC-SHA256>` over
 * `<id>.<timestamp>.<body>`, keyed by the bytes of the secret after its `whsec_` prefix (base64).
 * While a rolled secret's grace period lasts, the header carries one signature per secret.
 */

export const WEBHOOK_SECRET_PREFIX = "whsec_";

/** The secret's key length in bytes, as the specification allows it (24 to 64). */
export const WEBHOOK_SECRET_BYTES = { min: 24, max: 64, generated: 32 } as const;

/** How far a receiver lets a timestamp be from its own clock (the specification's 5 minutes). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

const encoder = new TextEncoder();
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A new secret: `whsec_` and the base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(WEBHOOK_SECRET_BYTES.generated));
  return `${WEBHOOK_SECRET_PREFIX}${bytes.toBase64()}`;
}

/**
 * The key bytes of `secret` (`whsec_` and base64 of 24–64 bytes), or a sentence saying which
 * rule it breaks.
 */
export function webhookSecretKey(secret: string): Uint8Array | string {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX))
    return `must start with ${WEBHOOK_SECRET_PREFIX} (then base64)`;
  const text = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  // Checked before decoding: 64 bytes are 88 base64 characters, and a huge string is refused here.
  if (text.length > 88 || !BASE64.test(text) || text.length % 4 !== 0)
    return `must be ${WEBHOOK_SECRET_PREFIX} and the padded base64 of ${WEBHOOK_SECRET_BYTES.min} to ${WEBHOOK_SECRET_BYTES.max} bytes`;
  const bytes = Uint8Array.fromBase64(text);
  if (bytes.length < WEBHOOK_SECRET_BYTES.min || bytes.length > WEBHOOK_SECRET_BYTES.max)
    return `must hold ${WEBHOOK_SECRET_BYTES.min} to ${WEBHOOK_SECRET_BYTES.max} bytes after ${WEBHOOK_SECRET_PREFIX} (got ${bytes.length})`;
  return bytes;
}

/** The key bytes of a secret the service issued or accepted; throws on any other. */
function keyBytesOrThrow(secret: string): Uint8Array {
  const key = webhookSecretKey(secret);
  if (typeof key === "string") throw new TypeError(`webhook secret ${key}`);
  return key;
}

/** `v1,<signature>` of one message under one secret. */
export async function signWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    keyBytesOrThrow(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = await crypto.subtle.sign(
    "HMAC",
    key,
    encoder.encode(`${id}.${timestampSeconds}.${body}`),
  );
  return `v1,${new Uint8Array(mac).toBase64()}`;
}

/** The three headers of one delivery, signed under every secret in `secrets` (current first). */
export async function webhookHeaders(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): Promise<Record<string, string>> {
  const signatures = await Promise.all(
    secrets.map((s) => signWebhook(s, id, timestampSeconds, body)),
  );
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": signatures.join(" "),
  };
}

/**
 * Whether `headers` carry a valid signature of `body` under `secret`, with a timestamp within
 * WEBHOOK_TOLERANCE_SECONDS of `nowSeconds`: what a receiver checks. Compared in constant time.
 */
export async function verifyWebhook(
  secret: string,
  headers: { get(name: string): string | null },
  body: string,
  nowSeconds: number,
): Promise<boolean> {
  const id = headers.get("webhook-id");
  const timestamp = headers.get("webhook-timestamp");
  const signatures = headers.get("webhook-signature");
  if (!id || !timestamp || !signatures || !/^[0-9]+$/.test(timestamp)) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > WEBHOOK_TOLERANCE_SECONDS) return false;
  const expected = encoder.encode(await signWebhook(secret, id, Number(timestamp), body));
  return signatures.split(" ").some((given) => {
    const bytes = encoder.encode(given);
    return bytes.length === expected.length && crypto.subtle.timingSafeEqual(bytes, expected);
  });
}
