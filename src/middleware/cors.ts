import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import type { AppEnv } from "../app-env";
import { BOOKMARK_HEADER } from "./d1-session";

/** Headers a browser client may read: quotas, paging, deprecation, tracing, read-your-writes. */
const EXPOSED_HEADERS = [
  "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy", "Retry-After",
  "Link", "Location", "Deprecation", "Sunset", "ETag", "Idempotent-Replayed", "X-Request-Id", "Server-Timing", BOOKMARK_HEADER,
];

const byConfig = new Map<string, MiddlewareHandler<AppEnv> | null>();

function corsFor(config: string): MiddlewareHandler<AppEnv> | null {
  const cached = byConfig.get(config);
  if (cached !== undefined) return cached;
  const origins = config.split(",").map((o) => o.trim()).filter(Boolean);
  const handler = origins.length
    ? cors({
        origin: origins,
        allowMethods: ["GET", "POST", "OPTIONS"],
        allowHeaders: ["Authorization", "Content-Type", "Idempotency-Key", "If-None-Match", "X-Request-Id", BOOKMARK_HEADER],
        exposeHeaders: EXPOSED_HEADERS,
        maxAge: 600,
      })
    : null;
  byConfig.set(config, handler);
  return handler;
}

/** CORS for the origins in CORS_ORIGINS (comma-separated; empty: CORS off). Preflights need no key. */
export const corsFromEnv: MiddlewareHandler<AppEnv> = (c, next) => {
  const handler = c.env.CORS_ORIGINS ? corsFor(c.env.CORS_ORIGINS) : null;
  return handler ? handler(c, next) : next();
};
