import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";

/**
 * A weak ETag for a JSON value: a 53-bit hash of its serialisation (cyrb53). Computed from the
 * value the handler already holds, which is far cheaper than cloning and digesting the response
 * stream on every GET (measured: ~1.6 ms of CPU per request locally).
 */
export function etagOf(value: unknown): string {
  return etagOfText(JSON.stringify(value));
}

/** The weak ETag of a JSON text (see etagOf). */
export function etagOfText(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return `W/"${(4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36)}-${text.length.toString(36)}"`;
}

/** Sets the ETag of a JSON answer; `conditional` turns a matching If-None-Match into 304. */
export function withETag<T>(c: Context<AppEnv>, value: T): T {
  c.header("ETag", etagOf(value));
  return value;
}

const opaque = (tag: string) => tag.trim().replace(/^W\//, "");

/**
 * If-None-Match → 304 Not Modified (RFC 9110 §13.1.2, weak comparison) for GET answers that carry
 * an ETag. Runs after the handler, so a 304 has still been authenticated and counted, and keeps
 * every header but the body's own.
 */
export const conditional: MiddlewareHandler<AppEnv> = async (c, next) => {
  const ifNoneMatch = c.req.header("If-None-Match");
  await next();
  if (!ifNoneMatch || c.res.status !== 200 || (c.req.method !== "GET" && c.req.method !== "HEAD")) return;
  const etag = c.res.headers.get("ETag");
  if (!etag) return;
  const match = ifNoneMatch.trim() === "*" || ifNoneMatch.split(",").some((t) => opaque(t) === opaque(etag));
  if (!match) return;
  const headers = new Headers(c.res.headers);
  headers.delete("Content-Type");
  headers.delete("Content-Length");
  await c.res.body?.cancel();
  c.res = undefined;
  c.res = new Response(null, { status: 304, headers });
};
