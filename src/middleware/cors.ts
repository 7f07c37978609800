import type { Context, MiddlewareHandler } from "hono";
import type { BaseEnv } from "../lib/hono-env";
import { type Route, RouteTable } from "../lib/route-table";
import { BOOKMARK_HEADER } from "./d1-session";

/** Headers a browser client may read: quotas, paging, deprecation, tracing, read-your-writes. */
const EXPOSED_HEADERS = [
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "RateLimit",
  "RateLimit-Policy",
  "Retry-After",
  "Link",
  "Location",
  "Deprecation",
  "Sunset",
  "ETag",
  "Idempotent-Replayed",
  "X-Request-Id",
  "Server-Timing",
  BOOKMARK_HEADER,
].join(", ");

const ALLOWED_HEADERS = [
  "Authorization",
  "Content-Type",
  "Idempotency-Key",
  "If-None-Match",
  "X-Request-Id",
  BOOKMARK_HEADER,
].join(", ");

const PREFLIGHT_MAX_AGE_S = 600;

/**
 * The public route at `path`, or null if no public route is there: the only paths a browser on
 * another origin may use. The operator API and the pages are not public, so they never answer a
 * cross-origin preflight.
 */
function publicRoute(routes: RouteTable, path: string): Route | null {
  const route = routes.find(path);
  return route?.audience === "public" ? route : null;
}

/** `origin` if it is one of the allowed `origins`, else null. */
const allowedOrigin = (origin: string | undefined, origins: string[]): string | null =>
  origin && origins.includes(origin) ? origin : null;

/**
 * For hono's timing(): Server-Timing is readable by the origins CORS allows, and only there. A
 * misconfigured deployment (no validated settings: timing runs outside the check) allows none.
 * Asked of every request, so the cheapest test (no allowed Origin: most requests) comes first.
 */
export const timingAllowOrigin =
  ({ routes }: { routes: RouteTable }) =>
  (c: Context<BaseEnv>): string | false => {
    const origins = c.get("config")?.CORS_ORIGINS;
    const origin = origins?.length ? allowedOrigin(c.req.header("Origin"), origins) : null;
    return origin && publicRoute(routes, c.req.path) ? origin : false;
  };

/**
 * CORS for the origins in CORS_ORIGINS (comma-separated; empty: CORS off), on the public /v1
 * routes only. A preflight (OPTIONS with Origin and Access-Control-Request-Method) from an
 * allowed origin, for a method the route has, gets 204 and needs no key. Any other OPTIONS goes
 * on to routing like any other method (401, 404 or 405): an unknown path or the operator API
 * never answers 204.
 */
export const corsFromConfig =
  ({ routes }: { routes: RouteTable }): MiddlewareHandler<BaseEnv> =>
  async (c, next) => {
    // CORS off (the default) costs this one test; a route's methods are listed for preflights only.
    const origins = c.get("config").CORS_ORIGINS;
    const route = origins.length === 0 ? null : publicRoute(routes, c.req.path);
    if (!route) return next();
    const origin = allowedOrigin(c.req.header("Origin"), origins);
    const requestedMethod = c.req.header("Access-Control-Request-Method");
    const methods =
      c.req.method === "OPTIONS" && origin && requestedMethod ? RouteTable.methodsOf(route) : [];
    if (origin && requestedMethod && methods.includes(requestedMethod)) {
      return c.body(null, 204, {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": methods.join(", "),
        "Access-Control-Allow-Headers": ALLOWED_HEADERS,
        "Access-Control-Max-Age": String(PREFLIGHT_MAX_AGE_S),
        Vary: "Origin",
      });
    }
    await next();
    // Whether or not this origin is allowed, the answer depends on Origin.
    c.res.headers.append("Vary", "Origin");
    // An OPTIONS that was not a preflight we answer is refused (401/404/405): no grant on it.
    if (origin && c.req.method !== "OPTIONS") {
      c.res.headers.set("Access-Control-Allow-Origin", origin);
      c.res.headers.set("Access-Control-Expose-Headers", EXPOSED_HEADERS);
    }
  };
