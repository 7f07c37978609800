import { ApiError } from "./errors";
import type { PetStatus } from "./schemas/pets";

/**
 * Opaque page cursors for GET /v1/pets: the last id of the page and the status filter it was
 * made for, signed with HMAC-SHA-256 so a malformed or altered cursor is refused (400) rather
 * than silently walking from the wrong place. The signing key derives from CURSOR_SECRET (or,
 * where that is not set, from ADMIN_TOKEN: HMAC does not reveal its key).
 */
const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function signingKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(`animal-store/cursor/v1/${secret}`), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    keys.set(secret, key);
  }
  return key;
}

const toBase64Url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const fromBase64Url = (text: string) => Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (ch) => ch.charCodeAt(0));

const MAC_BYTES = 16;

export async function encodeCursor(secret: string, lastId: number, status: PetStatus | undefined): Promise<string> {
  const payload = encoder.encode(`${lastId}:${status ?? ""}`);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", await signingKey(secret), payload)).slice(0, MAC_BYTES);
  const token = new Uint8Array(payload.length + MAC_BYTES);
  token.set(payload);
  token.set(mac, payload.length);
  return toBase64Url(token);
}

/** The id to continue after, if `cursor` is genuine and was made for this status filter. */
export async function decodeCursor(secret: string, cursor: string, status: PetStatus | undefined): Promise<number> {
  const invalid = () => new ApiError("invalid_request", "cursor: is not a cursor returned by this API (malformed or altered); restart from the first page.");
  if (!/^[A-Za-z0-9_-]{20,200}$/.test(cursor)) throw invalid();
  let token: Uint8Array;
  try {
    token = fromBase64Url(cursor);
  } catch {
    throw invalid();
  }
  // atob ignores the unused low bits of the last character: only the canonical spelling is ours.
  if (token.length <= MAC_BYTES || toBase64Url(token) !== cursor) throw invalid();
  const payload = token.slice(0, token.length - MAC_BYTES);
  const expected = new Uint8Array(await crypto.subtle.sign("HMAC", await signingKey(secret), payload)).slice(0, MAC_BYTES);
  if (!crypto.subtle.timingSafeEqual(expected, token.slice(token.length - MAC_BYTES))) throw invalid();
  const match = new TextDecoder().decode(payload).match(/^([1-9][0-9]{0,15}):(available|pending|sold|)$/);
  if (!match) throw invalid();
  if ((match[2] || undefined) !== status) {
    throw new ApiError("invalid_request", "cursor: was made for another status filter; keep the status of the page that returned it.");
  }
  return Number(match[1]);
}

/** RFC 8288 `Link: <…>; rel="next"`, absolute, keeping the client's limit and status. */
export function nextLink(requestUrl: string, limit: number, status: PetStatus | undefined, cursor: string): string {
  const url = new URL(requestUrl);
  const query = new URLSearchParams({ limit: String(limit) });
  if (status) query.set("status", status);
  query.set("cursor", cursor);
  return `<${url.origin}${url.pathname}?${query}>; rel="next"`;
}
