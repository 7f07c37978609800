import type { Context, MiddlewareHandler } from "hono";
import { etagOf } from "../lib/etag";

// The ETag of each object answered, by identity: a full page or a found pet kept in this
// isolate's memory (db/immutable-reads.ts) is the same object at every request, and never changes,
// so its tag is computed once rather than serialising and hashing it again each time. An answered
// value is never changed afterwards (a stored one cannot change at all).
const tagOfAnswered = new WeakMap<object, string>();

/** Sets the ETag of a JSON answer; `conditional` turns a matching If-None-Match into 304. */
export function withETag<T>(c: Context, value: T): T {
  const isObject = typeof value === "object" && value !== null;
  let tag = isObject ? tagOfAnswered.get(value) : undefined;
  if (tag === undefined) {
    tag = etagOf(value);
    if (isObject) tagOfAnswered.set(value, tag);
  }
  c.header("ETag", tag);
  return value;
}

const opaque = (tag: string) => tag.trim().replace(/^W\//, "");

/**
 * If-None-Match → 304 Not Modified (RFC 9110 §13.1.2, weak comparison) for GET answers that carry
 * an ETag. Runs after the handler, so a 304 has still been authenticated and counted, and keeps
 * every header but the body's own.
 */
export const conditional: MiddlewareHandler = async (c, next) => {
  const ifNoneMatch = c.req.header("If-None-Match");
  await next();
  if (!ifNoneMatch || c.res.status !== 200 || (c.req.method !== "GET" && c.req.method !== "HEAD"))
    return;
  const etag = c.res.headers.get("ETag");
  if (!etag) return;
  const match =
    ifNoneMatch.trim() === "*" || ifNoneMatch.split(",").some((t) => opaque(t) === opaque(etag));
  if (!match) return;
  const headers = new Headers(c.res.headers);
  headers.delete("Content-Type");
  headers.delete("Content-Length");
  await c.res.body?.cancel();
  c.res = undefined;
  c.res = new Response(null, { status: 304, headers });
};
