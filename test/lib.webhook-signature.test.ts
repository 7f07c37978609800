// Webhook signatures as the Standard Webhooks specification defines them, checked against the
// specification's own published example and against WebCrypto's HMAC computed here.
import { describe, expect, it } from "vitest";
import {
  newWebhookSecret,
  signWebhook,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  webhookHeaders,
  webhookSecretKey,
} from "../src/lib/webhook-signature";

// The example of the specification's reference libraries ("sign function works").
const SPEC = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

describe("signing (Standard Webhooks)", () => {
  it("gives the specification's published signature for its example", async () => {
    expect(await signWebhook(SPEC.secret, SPEC.id, SPEC.timestamp, SPEC.body)).toBe(SPEC.signature);
  });

  it("signs `id.timestamp.body` with HMAC-SHA256 keyed by the base64-decoded secret", async () => {
    const secret = newWebhookSecret();
    const body = JSON.stringify({ type: "quota.day.warning", data: { used: 80 } });
    const key = await crypto.subtle.importKey(
      "raw",
      Uint8Array.from(atob(secret.slice("whsec_".length)), (ch) => ch.charCodeAt(0)),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    const mac = await crypto.subtle.sign(
      "HMAC",
      key,
      new TextEncoder().encode(`evt_1.1700000000.${body}`),
    );
    const expected = btoa(String.fromCharCode(...new Uint8Array(mac)));
    expect(await signWebhook(secret, "evt_1", 1700000000, body)).toBe(`v1,${expected}`);
  });

  it("during a roll's grace period the header carries one signature per secret, current first", async () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
    const h = await webhookHeaders([current, previous], "evt_2", 1700000000, "{}");
    expect(h["webhook-id"]).toBe("evt_2");
    expect(h["webhook-timestamp"]).toBe("1700000000");
    expect(h["webhook-signature"]).toBe(
      `${await signWebhook(current, "evt_2", 1700000000, "{}")} ${await signWebhook(previous, "evt_2", 1700000000, "{}")}`,
    );
  });

  it("new secrets are whsec_ and the base64 of 32 random bytes, each different", () => {
    const a = newWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhookSecretKey(a)).toHaveLength(32);
    expect(newWebhookSecret()).not.toBe(a);
  });

  it.each([
    ["no prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", /must start with whsec_/],
    ["not base64", "whsec_not base64!", /padded base64/],
    ["too short: 16 bytes", `whsec_${btoa("x".repeat(16))}`, /24 to 64 bytes.*got 16/],
    ["too long: 65 bytes", `whsec_${btoa("x".repeat(65))}`, /24 to 64 bytes.*got 65/],
    ["oversized", `whsec_${"A".repeat(100_000)}`, /padded base64/],
  ])("a secret with %s is refused, saying why", (_label, secret, rule) => {
    expect(webhookSecretKey(secret)).toMatch(rule);
  });

  it("accepts 24 and 64 bytes, the specification's bounds", () => {
    expect(webhookSecretKey(`whsec_${btoa("y".repeat(24))}`)).toHaveLength(24);
    expect(webhookSecretKey(`whsec_${btoa("y".repeat(64))}`)).toHaveLength(64);
  });
});

describe("verifying, as a receiver does", () => {
  const headersOf = (h: Record<string, string>) => new Headers(h);

  it("accepts the specification's example within the tolerance, refuses it outside", async () => {
    const h = headersOf({
      "webhook-id": SPEC.id,
      "webhook-timestamp": String(SPEC.timestamp),
      "webhook-signature": SPEC.signature,
    });
    expect(await verifyWebhook(SPEC.secret, h, SPEC.body, SPEC.timestamp + 10)).toBe(true);
    const late = SPEC.timestamp + WEBHOOK_TOLERANCE_SECONDS + 1;
    expect(await verifyWebhook(SPEC.secret, h, SPEC.body, late)).toBe(false);
  });

  it("refuses a changed body, id or timestamp, another secret, and a missing header", async () => {
    const secret = newWebhookSecret();
    const h = await webhookHeaders([secret], "evt_3", 1700000000, '{"a":1}');
    const ok = (headers: Record<string, string>, body = '{"a":1}', s = secret) =>
      verifyWebhook(s, headersOf(headers), body, 1700000000);
    expect(await ok(h)).toBe(true);
    expect(await ok(h, '{"a":2}')).toBe(false);
    expect(await ok({ ...h, "webhook-id": "evt_4" })).toBe(false);
    expect(await ok({ ...h, "webhook-timestamp": "1700000001" })).toBe(false);
    expect(await ok(h, '{"a":1}', newWebhookSecret())).toBe(false);
    const { "webhook-signature": _, ...unsigned } = h;
    expect(await ok(unsigned)).toBe(false);
  });

  it("accepts a header signed by the old and new secrets under either one", async () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
    const h = headersOf(await webhookHeaders([current, previous], "evt_5", 1700000000, "{}"));
    expect(await verifyWebhook(current, h, "{}", 1700000000)).toBe(true);
    expect(await verifyWebhook(previous, h, "{}", 1700000000)).toBe(true);
  });
});
