import { createMiddleware } from "hono/factory";
import { failureWindowHeaders } from "../auth/failed-auth";
import { clientAddress } from "../lib/client-address";
import type { EnvWith } from "../lib/hono-env";
import type { RouteTable } from "../lib/route-table";

/** Set by `enforceQuota` once a request is admitted: the rate-limit headers of its answer. */
export interface RateLimitHeaderVariables {
  rateLimitHeaders: Record<string, string>;
}

/**
 * Every answer under /v1 carries the rate-limit headers (X-RateLimit-* and the IETF pair), except
 * the routes the table marks outside every quota (the OpenAPI document). An answer that already
 * has them keeps them: a refusal's, a counted guess's. An admitted request's answer gets those
 * `enforceQuota` worked out, whatever later middleware made of the response (a 405, an error).
 * An answer given before any key could be used (no credentials, another scheme, a malformed
 * header, a key that may not be used, the database failing while the key was looked up) gets the
 * limit that does apply to the client: its failed-authentication window, read from what this
 * isolate last learnt of it, not counted and without a call.
 */
export const rateLimitHeadersOnEveryAnswer = ({ routes }: { routes: RouteTable }) =>
  createMiddleware<EnvWith<Partial<RateLimitHeaderVariables>>>(async (c, next) => {
    await next();
    if (routes.find(c.req.path)?.outsideQuota || c.res.headers.has("X-RateLimit-Limit")) return;
    const headers =
      c.var.rateLimitHeaders ??
      failureWindowHeaders(clientAddress(c.req.header("CF-Connecting-IP")));
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  });
