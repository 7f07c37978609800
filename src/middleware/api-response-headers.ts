import type { MiddlewareHandler } from "hono";
import type { RouteAudience, RouteTable } from "../lib/route-table";

/** A JSON API answer is never a page: nothing may frame it, load from it or sniff its type. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/**
 * The cache policy of an API answer. Bodies and rate-limit headers depend on the caller's key,
 * so no shared cache may keep one: a successful read of the public API may be kept by the
 * caller's own cache but must be revalidated (its ETag makes that a cheap 304); everything else,
 * the operator API's answers (which may carry a new key's secret) and every error, must not be
 * stored at all.
 */
function cacheControlFor(
  method: string,
  audience: RouteAudience | undefined,
  status: number,
): string {
  const revalidatable =
    (method === "GET" || method === "HEAD") && (status === 200 || status === 304);
  return revalidatable && audience === "public" ? "private, no-cache" : "no-store";
}

/** Adds `token` to the comma-separated Vary of `headers` unless it is already there. */
function addVary(headers: Headers, token: string): void {
  const vary = headers.get("Vary");
  // Most answers have no Vary yet (CORS off): nothing to look through.
  if (vary === null) {
    headers.set("Vary", token);
    return;
  }
  const present = vary
    .split(",")
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  if (!present.includes(token.toLowerCase()) && !present.includes("*"))
    headers.append("Vary", token);
}

/**
 * Security and caching headers on every API answer, errors and 304s included (REST security
 * guidance): `Cache-Control` (see cacheControlFor), `X-Content-Type-Options: nosniff`,
 * `Vary: Authorization` (the answer depends on the key) and a CSP that forbids framing. The
 * routes for a `page` audience (the /docs page, the operator console) are left to set their own
 * on the pages they serve; any other answer, on a page's path (a 404 for an id that names no
 * page) or on no route's, is answered as an API error.
 */
export const apiResponseHeaders =
  ({ routes }: { routes: RouteTable }): MiddlewareHandler =>
  async (c, next) => {
    await next();
    const audience = routes.find(c.req.path)?.audience;
    // A page sets its own headers (its CSP allows its script and styles); any other answer on a
    // page's path (a 404 for an id that names no page, a 405, an error) is an API error.
    if (audience === "page" && c.res.headers.has("Content-Security-Policy")) return;
    const headers = c.res.headers;
    headers.set("Cache-Control", cacheControlFor(c.req.method, audience, c.res.status));
    headers.set("X-Content-Type-Options", "nosniff");
    headers.set("Content-Security-Policy", API_CSP);
    addVary(headers, "Authorization");
  };
