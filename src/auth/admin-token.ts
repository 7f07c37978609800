import { createMiddleware } from "hono/factory";
import { clientAddress } from "../lib/client-address";
import { configOrThrow, secretOrThrow } from "../lib/config";
import { secretsEqual } from "../lib/crypto";
import type { BaseEnv } from "../lib/hono-env";
import { credentialsError, parseAuthorization } from "./authorization-header";
import { failedGuess, isRefused } from "./failed-auth";

const REALM = "animal-store-admin";

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
  const credentials = parseAuthorization(c.req.header("Authorization"));
  if (credentials.kind !== "bearer")
    throw credentialsError(credentials, { realm: REALM, secretName: "ADMIN_TOKEN" });
  const shieldName = `admin:${clientAddress(c.req.header("CF-Connecting-IP"))}`;
  if (isRefused(shieldName) || !(await secretsEqual(credentials.token, expected))) {
    const challenge = `Bearer realm="${REALM}", error="invalid_token"`;
    const message = "The admin API needs Authorization: Bearer <ADMIN_TOKEN>.";
    throw await failedGuess(c.env, shieldName, message, challenge);
  }
  await next();
});
