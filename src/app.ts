import { Scalar } from "@scalar/hono-api-reference";
import { Hono } from "hono";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import { timing } from "hono/timing";
import type { AppEnv } from "./app-env";
import { requireAdmin } from "./auth/admin";
import { authenticate } from "./auth/authenticate";
import { methodNotAllowedResponse, notFound, onError } from "./errors";
import { accessLog } from "./middleware/access-log";
import { conditional } from "./middleware/conditional";
import { corsFromEnv } from "./middleware/cors";
import { d1Session } from "./middleware/d1-session";
import { deprecated } from "./middleware/deprecation";
import { openApiDocument } from "./openapi";
import { enforceQuota } from "./quota/enforce";
import { adminApi } from "./routes/admin";
import { petsApi } from "./routes/pets";

/** Cloudflare's ray id (e.g. 8f1d2c3b4a5e6f70-AMS), if the header holds one. */
const rayId = (ray: string | undefined) => (ray && /^[0-9a-f]{16}(-[A-Z]{3})?$/i.test(ray) ? ray : undefined);

/**
 * Request order: request id, log, timing, CORS (preflights end here), ETag, then for /v1:
 * 410 after a sunset, authentication (401), quota (429), D1 session, validation (400), handler.
 * Unknown paths get 404 and known paths with another method 405 with Allow.
 */
export function createApp() {
  const app = new Hono<AppEnv>();
  app.use(requestId({ headerName: "X-Request-Id", generator: (c) => rayId(c.req.header("cf-ray")) ?? crypto.randomUUID() }));
  app.use(accessLog);
  app.use(timing({ crossOrigin: true }));
  app.use(corsFromEnv);
  // If-None-Match → 304, after the quota has counted the request; a 304 keeps all other headers.
  app.use(conditional);
  app.use(methodNotAllowed({ app, onMethodNotAllowed: methodNotAllowedResponse }));

  // Public, and registered before the /v1 middleware so they need no key.
  const document = openApiDocument(petsApi);
  app.get("/v1/openapi.json", (c) => {
    const { text, etag } = document();
    return c.body(text, 200, { "Content-Type": "application/json", ETag: etag });
  });
  app.get("/docs", Scalar({ url: "/v1/openapi.json", pageTitle: "Animal Store API" }));

  app.get("/v1/pets/:petId", deprecated);
  app.use("/v1/*", authenticate, enforceQuota, d1Session);
  app.route("/v1", petsApi);

  app.use("/admin/v1/*", requireAdmin);
  app.route("/admin/v1", adminApi);

  app.notFound(notFound);
  app.onError(onError);
  return app;
}
