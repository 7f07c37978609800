import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { configOrThrow } from "../lib/config";
import type { BaseEnv } from "../lib/hono-env";
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
];

const ALLOWED_HEADERS = [
  "Authorization",
  "Content-Type",
  "Idempotency-Key",
  "If-None-Match",
  "X-Request-Id",
  BOOKMARK_HEADER,
];

// One handler per distinct origin list (the list is per environment, so this holds one or two).
const byOrigins = new Map<string, MiddlewareHandler>();

function corsFor(origins: string[]): MiddlewareHandler {
  const id = origins.join(",");
  let handler = byOrigins.get(id);
  if (!handler) {
    handler = cors({
      origin: origins,
      allowMethods: ["GET", "POST", "OPTIONS"],
      allowHeaders: ALLOWED_HEADERS,
      exposeHeaders: EXPOSED_HEADERS,
      maxAge: 600,
    });
    byOrigins.set(id, handler);
  }
  return handler;
}

/** CORS for the origins in CORS_ORIGINS (comma-separated; empty: CORS off). Preflights need no key. */
export const corsFromConfig: MiddlewareHandler<BaseEnv> = (c, next) => {
  const origins = configOrThrow(c.env).CORS_ORIGINS;
  return origins.length ? corsFor(origins)(c, next) : next();
};
