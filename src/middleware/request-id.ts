import { createMiddleware } from "hono/factory";
import type { BaseEnv } from "../lib/hono-env";

/** Cloudflare's ray id (e.g. 8f1d2c3b4a5e6f70-AMS), if the header holds one. */
const rayId = (ray: string | undefined) =>
  ray && /^[0-9a-f]{16}(-[A-Z]{3})?$/i.test(ray) ? ray : undefined;

/** A client's X-Request-Id worth keeping: at most 255 word characters, `-` or `=`. */
const saneClientId = (id: string | undefined) =>
  id && id.length <= 255 && !/[^\w\-=]/.test(id) ? id : undefined;

/**
 * Two ids per request. `requestId` is the service's own (Cloudflare's ray id, else a UUID): the
 * one the log lines and the audit trail carry, which no client can choose. `clientRequestId` is
 * the client's own X-Request-Id when it is sane, kept beside it and marked as the client's. The
 * response's X-Request-Id echoes the client's id when it sent one, else gives the service's.
 */
export const requestIds = createMiddleware<BaseEnv>(async (c, next) => {
  const own = rayId(c.req.header("cf-ray")) ?? crypto.randomUUID();
  const client = saneClientId(c.req.header("X-Request-Id"));
  c.set("requestId", own);
  if (client) c.set("clientRequestId", client);
  c.header("X-Request-Id", client ?? own);
  await next();
});
