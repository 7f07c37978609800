import { createMiddleware } from "hono/factory";
import { failureWindowHeaders } from "../auth/failed-auth";
import { clientAddress } from "../lib/client-address";
import type { BaseEnv } from "../lib/hono-env";
import type { RouteTable } from "../lib/route-table";

/**
 * Every /v1 answer has rate-limit headers but a route's own methods outside every quota; one with
 * none yet (before a key could be used) gets the client's failed-auth window: read, not counted.
 */
export const rateLimitHeadersOnEveryAnswer = ({ routes }: { routes: RouteTable }) =>
  createMiddleware<BaseEnv>(async (c, next) => {
    await next();
    if (routes.find(c.req.path)?.outsideQuota && routes.effectOf(c.req.method, c.req.path)) return;
    if (c.res.headers.has("X-RateLimit-Limit")) return;
    const client = clientAddress(c.req.header("CF-Connecting-IP"));
    for (const [name, value] of Object.entries(failureWindowHeaders(client)))
      c.res.headers.set(name, value);
  });
