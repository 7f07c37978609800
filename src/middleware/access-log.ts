import { createMiddleware } from "hono/factory";
import type { ApiKeyVariables } from "../auth/api-key";
import type { EnvWith } from "../lib/hono-env";
import { log } from "../lib/log";
import type { QuotaVariables } from "./enforce-quota";

/**
 * One structured line per request (Workers Logs indexes the JSON fields). Never the key itself:
 * its id and plan only. ACCESS_LOG=off turns it off. It runs first, so the key and the quota
 * outcome are there only when later middleware got that far.
 */
export const accessLog = createMiddleware<EnvWith<Partial<ApiKeyVariables & QuotaVariables>>>(
  async (c, next) => {
    if (c.get("config").ACCESS_LOG === "off") return next();
    const started = performance.now();
    await next();
    const key = c.get("apiKey");
    log("info", "request", {
      method: c.req.method,
      route: c.req.routePath,
      status: c.res.status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
      keyId: key?.id,
      plan: key?.plan,
      quota: c.get("quota"),
    });
  },
);
