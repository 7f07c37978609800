import { createMiddleware } from "hono/factory";
import { clientAddress } from "../lib/client-address";
import { configOrThrow, secretOrThrow } from "../lib/config";
import { secretsEqual } from "../lib/crypto";
import type { BaseEnv } from "../lib/hono-env";
import { authFailure, isRefused } from "./failed-auth";
import { bearerToken } from "./key-format";

/**
 * The operator API takes `Authorization: Bearer <ADMIN_TOKEN>` (a Worker secret), compared in
 * constant time. Failures count in the client's own shield, so the token cannot be guessed at
 * speed. Without ADMIN_TOKEN the admin API answers 500 (misconfigured) to every request.
 *
 * @example
 * ```ts
 * app.use("/admin/v1/*", requireAdmin);
 * ```
 */
export const requireAdmin = createMiddleware<BaseEnv>(async (c, next) => {
  const expected = secretOrThrow(configOrThrow(c.env), "ADMIN_TOKEN");
  const given = bearerToken(c.req.header("Authorization"));
  const shieldName = `admin:${clientAddress(c.req.header("CF-Connecting-IP"))}`;
  if (!given || isRefused(shieldName) || !(await secretsEqual(given, expected))) {
    const challenge = `Bearer realm="animal-store-admin"${given ? ', error="invalid_token"' : ""}`;
    const message = "The admin API needs Authorization: Bearer <ADMIN_TOKEN>.";
    throw await authFailure(c.env, shieldName, message, challenge);
  }
  await next();
});
