import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";

/**
 * One structured line per request (Workers Logs indexes the JSON fields). Never the key itself:
 * its id and plan only. ACCESS_LOG=off turns it off.
 */
export const accessLog: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.env.ACCESS_LOG === "off") return next();
  const started = performance.now();
  await next();
  const key = c.get("apiKey");
  console.log(
    JSON.stringify({
      requestId: c.get("requestId"),
      method: c.req.method,
      route: c.req.routePath,
      status: c.res.status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      keyId: key?.id,
      plan: key?.plan,
      quota: c.get("quota"),
    }),
  );
};
