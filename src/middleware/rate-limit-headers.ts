import { createMiddleware } from "hono/factory";
import { failureWindowHeaders } from "../auth/failed-auth";
import { clientAddress } from "../lib/client-address";
import type { BaseEnv } from "../lib/hono-env";
import type { RouteTable } from "../lib/route-table";

/**
 * Every answer under /v1 carries the rate-limit headers (X-RateLimit-* and the IETF pair), except
 * the routes the table marks outside every quota (the OpenAPI document). An answer that has them
 * keeps them: an admitted request's (enforceQuota set the key's windows, which a later 404, 405
 * or error keeps), a refusal's, a counted guess's. An answer given before any key could be used
 * (no credentials, another scheme, a malformed header, a key that may not be used, the database
 * failing while the key was looked up) gets the limit that does apply to the client: its
 * failed-authentication window, read from what this isolate last learnt of it, not counted and
 * without a call.
 */
export const rateLimitHeadersOnEveryAnswer = ({ routes }: { routes: RouteTable }) =>
  createMiddleware<BaseEnv>(async (c, next) => {
    await next();
    if (routes.find(c.req.path)?.outsideQuota || c.res.headers.has("X-RateLimit-Limit")) return;
    const client = clientAddress(c.req.header("CF-Connecting-IP"));
    for (const [name, value] of Object.entries(failureWindowHeaders(client)))
      c.res.headers.set(name, value);
  });
