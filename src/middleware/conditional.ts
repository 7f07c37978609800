import type { Context, MiddlewareHandler, TypedResponse } from "hono";
import type { JSONParsed } from "hono/utils/types";
import { etagOfText } from "../lib/etag";

/** An answer's JSON text and its ETag. */
interface Answered {
  text: string;
  tag: string;
}

// The JSON text and ETag of each object answered, by identity: a full page or a found pet kept in
// this isolate's memory (db/immutable-reads.ts) is the same object at every request, and never
// changes, so it is serialised and hashed once rather than at every request. An answered value is
// never changed afterwards (a stored one cannot change at all).
const answeredObjects = new WeakMap<object, Answered>();

function answeredOf(value: object): Answered {
  let answered = answeredObjects.get(value);
  if (!answered) {
    const text = JSON.stringify(value);
    answered = { text, tag: etagOfText(text) };
    answeredObjects.set(value, answered);
  }
  return answered;
}

/**
 * `c.json(value, 200)` with the ETag of its JSON text (`conditional` turns a matching
 * If-None-Match into 304): the same answer, serialised once per object rather than once for the
 * tag and once for the body at every request.
 */
export function jsonWithETag<T extends object>(
  c: Context,
  value: T,
): Response & TypedResponse<JSONParsed<T>, 200, "json"> {
  const { text, tag } = answeredOf(value);
  c.header("ETag", tag);
  // c.json's answer exactly (its Content-Type), from the text made once; typed as c.json types it.
  const answer: Response = c.body(text, 200, { "Content-Type": "application/json" });
  return answer as Response & TypedResponse<JSONParsed<T>, 200, "json">;
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
