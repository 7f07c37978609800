import { BOOKMARK_PATTERN } from "../../db/session";
import { signedTag, TAG_BYTES, verifyTagUnderAny } from "../../lib/crypto";
import { fromBase64Url, toBase64Url } from "../../lib/encoding";
import { ApiError, invalidCursor } from "../../lib/errors";
import { ExpiringMap } from "../../lib/expiring-map";
import type { PetStatus } from "../../schemas/pets";

/**
 * Opaque page cursors for GET /v1/pets. A cursor holds the last id of its page, the status filter
 * it was made for and the D1 bookmark the page was read at (so the next page, perhaps served by
 * another read replica, is at least as fresh and no pet is skipped). It is signed with
 * HMAC-SHA-256 under CURSOR_SECRET, so a malformed or altered cursor is refused (400) rather than
 * silently walking from the wrong place.
 */
interface CursorState {
  afterId: number;
  bookmark: string | null;
}

const encoder = new TextEncoder();

export async function encodeCursor(
  secret: string,
  lastId: number,
  status: PetStatus | undefined,
  bookmark: string | null,
): Promise<string> {
  const payload = encoder.encode(`${lastId}:${status ?? ""}:${bookmark ?? ""}`);
  const token = new Uint8Array(payload.length + TAG_BYTES);
  token.set(payload);
  token.set(await signedTag(secret, payload), payload.length);
  return toBase64Url(token);
}

/**
 * Where to continue, if `cursor` is genuine (signed with one of `secrets`, cursorSecretsAcceptedOrThrow)
 * and was made for this status filter.
 */
export async function decodeCursorOrThrow(
  secrets: readonly string[],
  cursor: string,
  status: PetStatus | undefined,
): Promise<CursorState> {
  const invalid = invalidCursor;
  if (!/^[A-Za-z0-9_-]{20,400}$/.test(cursor)) throw invalid();
  let token: Uint8Array;
  try {
    token = fromBase64Url(cursor);
  } catch {
    throw invalid();
  }
  // Decoding ignores the unused low bits of the last character: only the canonical spelling is ours.
  if (token.length <= TAG_BYTES || toBase64Url(token) !== cursor) throw invalid();
  const payload = token.slice(0, token.length - TAG_BYTES);
  if (!(await verifyTagUnderAny(secrets, payload, token.slice(token.length - TAG_BYTES))))
    throw invalid();
  const [id, madeFor, bookmark, ...rest] = new TextDecoder().decode(payload).split(":");
  if (
    !id ||
    !/^[1-9][0-9]{0,15}$/.test(id) ||
    rest.length ||
    (bookmark && !BOOKMARK_PATTERN.test(bookmark))
  )
    throw invalid();
  if ((madeFor || undefined) !== status) {
    throw new ApiError(
      "invalid_request",
      "cursor: was made for another status filter; keep the status of the page that returned it.",
    );
  }
  return { afterId: Number(id), bookmark: bookmark || null };
}

/**
 * RFC 8288 `Link: <…>; rel="next"`, keeping the client's limit and status: absolute on
 * `publicOrigin` (the PUBLIC_ORIGIN setting), or a relative reference when that is empty. Never
 * built from the request's Host header, which the client chooses.
 */
export function nextLink(
  publicOrigin: string,
  path: string,
  limit: number,
  status: PetStatus | undefined,
  cursor: string,
): string {
  const query = new URLSearchParams({ limit: String(limit) });
  if (status) query.set("status", status);
  query.set("cursor", cursor);
  return `<${publicOrigin}${path}?${query}>; rel="next"`;
}

// The Links this isolate made, by everything each is made of (a pure function of them): every
// request for the same full page, signed with the same secret, gets the same text without an
// HMAC and a URL encoding each time. Bounded; nothing in it ever goes stale.
const MAX_LINKS_IN_ISOLATE = 1_024;
const linksMade = new ExpiringMap<string, string>(MAX_LINKS_IN_ISOLATE);

/**
 * The `Link` to the page after `lastId` (nextLink of encodeCursor's cursor, signed with `secret`),
 * made once per isolate for each page, secret, origin and bookmark.
 */
export async function nextPageLink(
  secret: string,
  publicOrigin: string,
  path: string,
  limit: number,
  status: PetStatus | undefined,
  lastId: number,
  bookmark: string | null,
): Promise<string> {
  const made = `${secret}\n${publicOrigin}\n${path}\n${limit}\n${status ?? ""}\n${lastId}\n${bookmark ?? ""}`;
  const known = linksMade.get(made, 0);
  if (known !== undefined) return known;
  const cursor = await encodeCursor(secret, lastId, status, bookmark);
  const link = nextLink(publicOrigin, path, limit, status, cursor);
  linksMade.set(made, link, Infinity);
  return link;
}
