import { createMiddleware } from "hono/factory";
import { BOOKMARK_PATTERN, D1Session } from "../db/session";
import { ApiError } from "../lib/errors";
import type { EnvWith } from "../lib/hono-env";

export const BOOKMARK_HEADER = "x-d1-bookmark";

/** Set by `d1Session`: the request's D1 session. */
export interface D1SessionVariables {
  d1: D1Session;
}

/**
 * Gives the request a D1 session that starts from the client's `x-d1-bookmark`, so a client that
 * sends back the bookmark it last received sees at least its own writes; every response that
 * touched D1 returns the session's latest bookmark.
 */
export const d1Session = createMiddleware<EnvWith<D1SessionVariables>>(async (c, next) => {
  const bookmark = c.req.header(BOOKMARK_HEADER);
  if (bookmark !== undefined && !BOOKMARK_PATTERN.test(bookmark)) {
    throw new ApiError(
      "invalid_request",
      `${BOOKMARK_HEADER}: must be a bookmark returned by this API.`,
    );
  }
  const d1 = new D1Session(c.env.DB, bookmark);
  c.set("d1", d1);
  await next();
  const latest = d1.bookmark();
  if (latest) c.res.headers.set(BOOKMARK_HEADER, latest);
});
