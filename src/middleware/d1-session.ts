import { createMiddleware } from "hono/factory";
import { BOOKMARK_PATTERN, D1Session } from "../db/session";
import { cursorSecretsAcceptedOrThrow } from "../lib/config";
import { signedTag, verifyTagUnderAny } from "../lib/crypto";
import { fromBase64Url, toBase64Url } from "../lib/encoding";
import { ApiError } from "../lib/errors";
import type { EnvWith } from "../lib/hono-env";

export const BOOKMARK_HEADER = "x-d1-bookmark";

/** Set by `d1Session`: the request's D1 session. */
export interface D1SessionVariables {
  d1: D1Session;
}

const encoder = new TextEncoder();
/** `<D1 bookmark>.<22 base64url characters: the signedTag's 16 bytes>` */
const SIGNED_BOOKMARK = /^([0-9a-f-]{17,600})\.([A-Za-z0-9_-]{22})$/i;

// "bookmark:" keeps these tags apart from page cursors', which are signed with the same secret.
const signedPayload = (bookmark: string) => encoder.encode(`bookmark:${bookmark}`);

/** The bookmark as sent to the client: D1's bookmark and a tag that proves this API issued it. */
export async function signBookmark(secret: string, bookmark: string): Promise<string> {
  return `${bookmark}.${toBase64Url(await signedTag(secret, signedPayload(bookmark)))}`;
}

/**
 * The D1 bookmark inside a header value this API issued; throws 400 for anything else. A bookmark
 * the API did not issue could name a point D1 has not reached (`ffffffff-…`, "from the future"):
 * a replica would wait for it in vain, and every later bookmark and cursor of that client would
 * carry it on. Signing makes such a value impossible to send. `secrets`: those a bookmark may be
 * signed with (cursorSecretsAcceptedOrThrow); none accepts no bookmark.
 */
export async function verifiedBookmarkOrThrow(
  secrets: readonly string[],
  header: string,
): Promise<string> {
  const refuse = () =>
    new ApiError(
      "invalid_request",
      `${BOOKMARK_HEADER}: must be a bookmark returned by this API, sent back unchanged.`,
    );
  const [, bookmark = "", tagText = ""] = header.match(SIGNED_BOOKMARK) ?? [];
  if (secrets.length === 0 || !BOOKMARK_PATTERN.test(bookmark)) throw refuse();
  // 22 base64url characters (SIGNED_BOOKMARK) always decode, to 16 bytes. Decoding ignores the
  // unused low bits of the last character: only the canonical spelling is ours.
  const tag = fromBase64Url(tagText);
  if (toBase64Url(tag) !== tagText) throw refuse();
  if (!(await verifyTagUnderAny(secrets, signedPayload(bookmark), tag))) throw refuse();
  return bookmark;
}

/**
 * Gives the request a D1 session that starts from the client's `x-d1-bookmark`, so a client that
 * sends back the bookmark it last received sees at least its own writes; every response that
 * touched D1 returns the session's latest bookmark, signed with CURSOR_SECRET (without it no
 * bookmark is returned, and none can be accepted).
 */
export const d1Session = createMiddleware<EnvWith<D1SessionVariables>>(async (c, next) => {
  const secret = c.get("config").CURSOR_SECRET;
  const header = c.req.header(BOOKMARK_HEADER);
  const bookmark =
    header === undefined
      ? undefined
      : await verifiedBookmarkOrThrow(
          secret ? cursorSecretsAcceptedOrThrow(c.get("config")) : [],
          header,
        );
  const d1 = new D1Session(c.env.DB, bookmark);
  c.set("d1", d1);
  await next();
  const latest = d1.bookmark();
  if (latest && secret) c.res.headers.set(BOOKMARK_HEADER, await signBookmark(secret, latest));
});
