// The tag of this API's opaque tokens (page cursors, D1 bookmarks): HMAC-SHA-256 truncated to
// 16 bytes, checked in constant time.
import { describe, expect, it } from "vitest";
import { signedTag, TAG_BYTES, verifyTag } from "../src/lib/crypto";
import { toHex } from "../src/lib/encoding";

const text = (s: string) => new TextEncoder().encode(s);

// RFC 4231, test case 2: HMAC-SHA-256 with key "Jefe".
const PAYLOAD = text("what do ya want for nothing?");
const RFC_4231_HEX = "5bdcc146bf60754e6a042426089575c7";
const RFC_4231_TAG = new Uint8Array(RFC_4231_HEX.match(/../g)!.map((byte) => parseInt(byte, 16)));

describe("signedTag / verifyTag", () => {
  it("signedTag is HMAC-SHA-256 truncated to 16 bytes", async () => {
    expect(TAG_BYTES).toBe(16);
    expect(toHex(await signedTag("Jefe", PAYLOAD))).toBe(RFC_4231_HEX);
  });

  it("verifyTag accepts the tag and refuses any other: another byte, secret, payload or length", async () => {
    expect(await verifyTag("Jefe", PAYLOAD, RFC_4231_TAG)).toBe(true);
    const altered = RFC_4231_TAG.slice();
    altered[TAG_BYTES - 1]! ^= 1;
    expect(await verifyTag("Jefe", PAYLOAD, altered)).toBe(false);
    expect(await verifyTag("jefe", PAYLOAD, RFC_4231_TAG)).toBe(false);
    expect(await verifyTag("Jefe", text("what do ya want for nothing!"), RFC_4231_TAG)).toBe(false);
    expect(await verifyTag("Jefe", PAYLOAD, RFC_4231_TAG.slice(0, 15))).toBe(false);
    expect(await verifyTag("Jefe", PAYLOAD, new Uint8Array(0))).toBe(false);
    const longer = new Uint8Array(TAG_BYTES + 1);
    longer.set(RFC_4231_TAG);
    expect(await verifyTag("Jefe", PAYLOAD, longer)).toBe(false);
  });
});
