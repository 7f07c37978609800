import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { DatabaseError } from "../db/database-error";
import { ApiError } from "../errors";

export const BOOKMARK_HEADER = "x-d1-bookmark";
// D1 bookmarks are dash-separated hex groups; anything else is refused before it reaches D1.
const BOOKMARK_PATTERN = /^[0-9a-f]{8}(-[0-9a-f]{8,64}){1,8}$/i;

/**
 * Reads go through a D1 session so they may be served by the nearest read replica, while the
 * client's `x-d1-bookmark` guarantees it sees at least its own earlier writes.
 */
export const d1Session: MiddlewareHandler<AppEnv> = async (c, next) => {
  const bookmark = c.req.header(BOOKMARK_HEADER);
  if (bookmark !== undefined && !BOOKMARK_PATTERN.test(bookmark)) {
    throw new ApiError("invalid_request", `${BOOKMARK_HEADER}: must be a bookmark returned by this API.`);
  }
  let session: D1DatabaseSession;
  try {
    session = c.env.DB.withSession(bookmark ?? "first-unconstrained");
  } catch (err) {
    throw new DatabaseError(err);
  }
  c.set("db", session);
  await next();
  const latest = session.getBookmark();
  if (latest) c.res.headers.set(BOOKMARK_HEADER, latest);
};
