import { createMiddleware } from "hono/factory";
import { failureWindowHeaders } from "../auth/failed-auth";
import { clientAddress } from "../lib/client-address";
import type { BaseEnv } from "../lib/hono-env";
import type { RouteTable } from "../lib/route-table";

/**
 * Every answer under /v1 carries the rate-limit headers, except the routes outside every quota.
 * An answer that has none yet (given before any key could be used) gets the client's
 * failed-authentication window, as this isolate last learnt it: not counted, without a call.
 */
export const rateLimitHeadersOnEveryAnswer = ({ routes }: { routes: RouteTable }) =>
  createMiddleware<BaseEnv>(async (c, next) => {
    await next();
    if (routes.find(c.req.path)?.outsideQuota || c.res.headers.has("X-RateLimit-Limit")) return;
    const client = clientAddress(c.req.header("CF-Connecting-IP"));
    for (const [name, value] of Object.entries(failureWindowHeaders(client)))
      c.res.headers.set(name, value);
  });
