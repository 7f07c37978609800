import type { Context, MiddlewareHandler } from "hono";
import type { BaseEnv } from "../lib/hono-env";
import { RouteTable } from "../lib/route-table";
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
 * The methods of the public route at `path`, or null if no public route is there: the only
 * paths a browser on another origin may use. The operator API and the pages are not public, so
 * they never answer a cross-origin preflight.
 */
function publicRouteMethods(routes: RouteTable, path: string): string[] | null {
  const route = routes.find(path);
  return route?.audience === "public" ? RouteTable.methodsOf(route) : null;
}

/** `origin` if it is one of the allowed `origins`, else null. */
const allowedOrigin = (origin: string | undefined, origins: string[]): string | null =>
  origin && origins.includes(origin) ? origin : null;

/**
 * For hono's timing(): Server-Timing is readable by the origins CORS allows, and only there. A
 * misconfigured deployment (no validated settings: timing runs outside the check) allows none.
 */
export const timingAllowOrigin =
  ({ routes }: { routes: RouteTable }) =>
  (c: Context<BaseEnv>): string | false => {
    const origins = c.var.config?.CORS_ORIGINS;
    if (!origins || !publicRouteMethods(routes, c.req.path)) return false;
    return allowedOrigin(c.req.header("Origin"), origins) ?? false;
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
    const methods = publicRouteMethods(routes, c.req.path);
    const origins = c.var.config.CORS_ORIGINS;
    if (!methods || origins.length === 0) return next();
    const origin = allowedOrigin(c.req.header("Origin"), origins);
    const requestedMethod = c.req.header("Access-Control-Request-Method");
    if (
      c.req.method === "OPTIONS" &&
      origin &&
      requestedMethod &&
      methods.includes(requestedMethod)
    ) {
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
