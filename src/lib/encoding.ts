// Byte encodings with the runtime's native Uint8Array methods (TC39 "Uint8Array to/from base64",
// in workerd's V8): no per-byte JavaScript on the request path. TypeScript's ES2024 lib does not
// declare them yet, hence the declarations below.
declare global {
  interface Uint8Array {
    toBase64(options?: { alphabet?: "base64" | "base64url"; omitPadding?: boolean }): string;
    toHex(): string;
  }
  interface Uint8ArrayConstructor {
    fromBase64(
      text: string,
      options?: {
        alphabet?: "base64" | "base64url";
        lastChunkHandling?: "loose" | "strict" | "stop-before-partial";
      },
    ): Uint8Array;
    fromHex(text: string): Uint8Array;
  }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** base64url without padding (RFC 4648 §5), for opaque tokens in URLs. */
export function toBase64Url(bytes: Uint8Array): string {
  return bytes.toBase64({ alphabet: "base64url", omitPadding: true });
}

/** Throws on anything that is not unpadded base64url (native decoding would also skip whitespace). */
export function fromBase64Url(text: string): Uint8Array {
  if (!BASE64URL.test(text)) throw new SyntaxError("not base64url");
  return Uint8Array.fromBase64(text, { alphabet: "base64url" });
}

/** Lowercase hex, two digits a byte. */
export function toHex(bytes: ArrayBuffer | Uint8Array): string {
  return (bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)).toHex();
}

/** The bytes of lowercase or uppercase hex, two digits a byte; throws on anything else. */
export function fromHex(text: string): Uint8Array {
  return Uint8Array.fromHex(text);
}
