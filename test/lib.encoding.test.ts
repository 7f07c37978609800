import { describe, expect, it } from "vitest";
import { sha256Hex } from "../src/lib/crypto";
import { fromBase64Url, toBase64Url, toHex } from "../src/lib/encoding";

describe("byte encodings", () => {
  it("writes unpadded base64url and reads it back", () => {
    const bytes = new Uint8Array([250, 1, 2, 255, 62, 63]);
    expect(toBase64Url(bytes)).toBe("-gEC_z4_");
    expect(toBase64Url(new Uint8Array([250]))).toBe("-g");
    expect([...fromBase64Url("-gEC_z4_")]).toEqual([...bytes]);
    expect([...fromBase64Url("-g")]).toEqual([250]);
  });

  it.each(["-g==", "+gEC", "/gEC", "-gE C", " -gEC", "-gEC\n", "%2B", "a"])(
    "refuses %j",
    (text) => {
      expect(() => fromBase64Url(text)).toThrow();
    },
  );

  it("writes lowercase hex, two digits a byte", () => {
    expect(toHex(new Uint8Array([0, 15, 16, 255]))).toBe("000f10ff");
    expect(toHex(new Uint8Array([1, 2]).buffer)).toBe("0102");
  });

  it("hashes to the known SHA-256 digest", async () => {
    expect(await sha256Hex("abc")).toBe(
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  });
});
