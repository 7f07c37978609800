import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { ApiError } from "../errors";
import { secretsEqual } from "./secrets";

/** The operator API takes `Authorization: Bearer <ADMIN_TOKEN>` (a Worker secret), compared in constant time. */
export const requireAdmin: MiddlewareHandler<AppEnv> = async (c, next) => {
  const expected = c.env.ADMIN_TOKEN;
  const given = c.req.header("Authorization")?.match(/^Bearer +(\S+) *$/i)?.[1];
  if (!expected) console.error(JSON.stringify({ level: "error", msg: "ADMIN_TOKEN is not set; the admin API refuses every request" }));
  if (!expected || !given || !(await secretsEqual(given, expected))) {
    throw new ApiError("unauthorized", "The admin API needs Authorization: Bearer <ADMIN_TOKEN>.", {
      "WWW-Authenticate": `Bearer realm="animal-store-admin"${given ? ', error="invalid_token"' : ""}`,
    });
  }
  await next();
};
