import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { bearerToken, secretsEqual } from "./secrets";
import { authFailure, clientAddress, isRefused } from "./shield";

/**
 * The operator API takes `Authorization: Bearer <ADMIN_TOKEN>` (a Worker secret), compared in
 * constant time. Failures count in the client's own shield, so the token cannot be guessed at speed.
 */
export const requireAdmin: MiddlewareHandler<AppEnv> = async (c, next) => {
  const expected = c.env.ADMIN_TOKEN;
  const given = bearerToken(c.req.header("Authorization"));
  const shieldName = `admin:${clientAddress(c)}`;
  if (!expected) console.error(JSON.stringify({ level: "error", msg: "ADMIN_TOKEN is not set; the admin API refuses every request" }));
  if (!expected || !given || isRefused(shieldName) || !(await secretsEqual(given, expected))) {
    const challenge = `Bearer realm="animal-store-admin"${given ? ', error="invalid_token"' : ""}`;
    throw await authFailure(c, shieldName, "The admin API needs Authorization: Bearer <ADMIN_TOKEN>.", challenge);
  }
  await next();
};
