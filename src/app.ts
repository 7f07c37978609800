import { Hono } from "hono";
import { contextStorage } from "hono/context-storage";
import { methodNotAllowed } from "hono/method-not-allowed";
import { timing } from "hono/timing";
import { requireAdmin } from "./auth/admin-token";
import { authenticateAndAdmit } from "./auth/api-key";
import { configOrThrow } from "./lib/config";
import type { BaseEnv } from "./lib/hono-env";
import { accessLog } from "./middleware/access-log";
import { apiResponseHeaders } from "./middleware/api-response-headers";
import { conditional } from "./middleware/conditional";
import { corsFromConfig, timingAllowOrigin } from "./middleware/cors";
import { d1Session } from "./middleware/d1-session";
import { deprecated, removedAfterSunset } from "./middleware/deprecation";
import { enforceQuota } from "./middleware/enforce-quota";
import { methodNotAllowedResponse, notFound, onError } from "./middleware/error-handler";
import { rateLimitHeadersOnEveryAnswer } from "./middleware/rate-limit-headers";
import { requestIds } from "./middleware/request-id";
import { adminApi } from "./routes/admin/routes";
import { consolePages } from "./routes/console/routes";
import { adminDocsPage, docsPage } from "./routes/docs-page";
import { homePage } from "./routes/home-page";
import { servedDocument } from "./routes/openapi-served";
import { petsApi } from "./routes/pets/routes";
import { routeTable } from "./routes/table";
import { ownUsageApi } from "./routes/usage/routes";

/**
 * Request order: context storage (for the logger), request id, timing, configuration check,
 * log, CORS (preflights end here), ETag, then for /v1: rate-limit headers on every answer,
 * authentication (401), quota (429), D1 session, 410 after a sunset, validation (400), handler.
 * Unknown paths get 404 and known paths with another method 405 with Allow.
 */
export function createApp() {
  const app = new Hono<BaseEnv>();
  app.use(contextStorage());
  app.use(requestIds);
  // Outside everything that can answer, so errors, 304s, 404s and 405s get the headers too.
  app.use(apiResponseHeaders({ routes: routeTable }));
  // Outside the configuration check, so a misconfigured deployment's 500 has Server-Timing too.
  app.use(timing({ crossOrigin: timingAllowOrigin({ routes: routeTable }) }));
  // Every setting is checked before any work: a misconfigured deployment answers 500 and logs why.
  // The rest of the request reads the validated settings from c.var.config.
  app.use((c, next) => {
    c.set("config", configOrThrow(c.env));
    return next();
  });
  app.use(accessLog);
  app.use(corsFromConfig({ routes: routeTable }));
  // Outside everything that can answer a /v1 request (preflights aside), 405s and errors included.
  app.use("/v1/*", rateLimitHeadersOnEveryAnswer({ routes: routeTable }));
  // If-None-Match → 304, after the quota has counted the request; a 304 keeps all other headers.
  app.use(conditional);
  app.use(methodNotAllowed({ app, onMethodNotAllowed: methodNotAllowedResponse }));

  // Public, and registered before the /v1 middleware so they need no key.
  // Generated at build time (routes/openapi-served.ts).
  app.get("/v1/openapi.json", servedDocument("public"));
  // Its script and styles are static assets (public/docs), served without the Worker.
  app.get("/docs", docsPage);
  // The first thing a newcomer opens: links to the reference, the document and the console.
  app.get("/", homePage);

  // The key's own usage: authenticated, but outside the quota it reports on (its own limit).
  app.route("/v1", ownUsageApi);
  app.get("/v1/pets/:petId", deprecated);
  app.use("/v1/*", authenticateAndAdmit, enforceQuota({ routes: routeTable }), d1Session);
  app.get("/v1/pets/:petId", removedAfterSunset);
  app.route("/v1", petsApi);

  // The operator API's own document: no data in it, so no token needed.
  app.get("/admin/v1/openapi.json", servedDocument("operator"));
  // Its reference, public like the document (same assets and CSP as /docs).
  app.get("/admin/docs", adminDocsPage);
  // The operator console: a public page that asks for the token and calls the admin API.
  app.route("/admin", consolePages);
  app.use("/admin/v1/*", requireAdmin);
  app.route("/admin/v1", adminApi);

  app.notFound(notFound);
  app.onError(onError);
  return app;
}
