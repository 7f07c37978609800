import { createMiddleware } from "hono/factory";
import { BOOKMARK_PATTERN, D1Session } from "../db/session";
import { configOrThrow } from "../lib/config";
import { hmacTag } from "../lib/crypto";
import { toBase64Url } from "../lib/encoding";
import { ApiError } from "../lib/errors";
import type { EnvWith } from "../lib/hono-env";

export const BOOKMARK_HEADER = "x-d1-bookmark";

/** Set by `d1Session`: the request's D1 session. */
export interface D1SessionVariables {
  d1: D1Session;
}

const encoder = new TextEncoder();
const TAG_BYTES = 16;
/** `<D1 bookmark>.<22 base64url characters of HMAC>` */
const SIGNED_BOOKMARK = /^([0-9a-f-]{17,600})\.([A-Za-z0-9_-]{22})$/i;

// "bookmark:" keeps these tags apart from page cursors', which are signed with the same secret.
const tagOf = (secret: string, bookmark: string) =>
  hmacTag(secret, encoder.encode(`bookmark:${bookmark}`), TAG_BYTES);

/** The bookmark as sent to the client: D1's bookmark and a tag that proves this API issued it. */
export async function signBookmark(secret: string, bookmark: string): Promise<string> {
  return `${bookmark}.${toBase64Url(await tagOf(secret, bookmark))}`;
}

/**
 * The D1 bookmark inside a header value this API issued; throws 400 for anything else. A bookmark
 * the API did not issue could name a point D1 has not reached (`ffffffff-…`, "from the future"):
 * a replica would wait for it in vain, and every later bookmark and cursor of that client would
 * carry it on. Signing makes such a value impossible to send.
 */
export async function verifiedBookmarkOrThrow(
  secret: string | undefined,
  header: string,
): Promise<string> {
  const refuse = () =>
    new ApiError(
      "invalid_request",
      `${BOOKMARK_HEADER}: must be a bookmark returned by this API, sent back unchanged.`,
    );
  const [, bookmark = "", tag = ""] = header.match(SIGNED_BOOKMARK) ?? [];
  if (!secret || !BOOKMARK_PATTERN.test(bookmark)) throw refuse();
  // Compared as text, so only the canonical spelling of the tag is accepted.
  const expected = toBase64Url(await tagOf(secret, bookmark));
  if (!crypto.subtle.timingSafeEqual(encoder.encode(tag), encoder.encode(expected))) throw refuse();
  return bookmark;
}

/**
 * Gives the request a D1 session that starts from the client's `x-d1-bookmark`, so a client that
 * sends back the bookmark it last received sees at least its own writes; every response that
 * touched D1 returns the session's latest bookmark, signed with CURSOR_SECRET (without it no
 * bookmark is returned, and none can be accepted).
 */
export const d1Session = createMiddleware<EnvWith<D1SessionVariables>>(async (c, next) => {
  const secret = configOrThrow(c.env).CURSOR_SECRET;
  const header = c.req.header(BOOKMARK_HEADER);
  const bookmark = header === undefined ? undefined : await verifiedBookmarkOrThrow(secret, header);
  const d1 = new D1Session(c.env.DB, bookmark);
  c.set("d1", d1);
  await next();
  const latest = d1.bookmark();
  if (latest && secret) c.res.headers.set(BOOKMARK_HEADER, await signBookmark(secret, latest));
});
