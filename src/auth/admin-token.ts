import { createMiddleware } from "hono/factory";
import { clientAddress } from "../lib/client-address";
import { type AdminAccess, type AdminToken, adminTokensOrThrow } from "../lib/config";
import { secretsEqual } from "../lib/crypto";
import { ApiError } from "../lib/errors";
import type { EnvWith } from "../lib/hono-env";
import { credentialsError, parseAuthorization } from "./authorization-header";
import { failedGuess } from "./failed-auth";

const REALM = "animal-store-admin";

/**
 * Set by `requireAdmin`: the name of the admin token the request came with (the audit actor) and
 * what that token may do.
 */
export interface AdminVariables {
  adminActor: string;
  adminAccess: AdminAccess;
}

/** The token equal to `given`, comparing with every token in constant time. */
async function tokenMatching(given: string, tokens: AdminToken[]) {
  // Every token is compared, so the time taken does not say which one (if any) matched.
  const matches = await Promise.all(tokens.map((t) => secretsEqual(given, t.token)));
  return tokens.find((_, i) => matches[i]) ?? null;
}

/**
 * Whether a token with `access` may make a request with `method`: full access may do anything; a
 * read-only token only what changes nothing (every admin operation that reads is a GET).
 */
export function mayUseMethod(access: AdminAccess, method: string): boolean {
  return access === "full" || method === "GET" || method === "HEAD";
}

/**
 * The operator API takes `Authorization: Bearer <admin token>`: `ADMIN_TOKEN`, or one of the
 * named `ADMIN_TOKENS` or read-only `ADMIN_READ_TOKENS` (Worker secrets), compared in constant
 * time. The token's name becomes the request's `adminActor`; a read-only token's writes are
 * refused (403). Failures count in the client's own shield, so tokens cannot be guessed at speed,
 * while a correct token is never refused. With no admin token configured the admin API answers
 * 500 (misconfigured).
 *
 * @example
 * ```ts
 * app.use("/admin/v1/*", requireAdmin);
 * ```
 */
export const requireAdmin = createMiddleware<EnvWith<AdminVariables>>(async (c, next) => {
  const tokens = adminTokensOrThrow(c.var.config);
  const credentials = parseAuthorization(c.req.header("Authorization"));
  if (credentials.kind !== "bearer")
    throw credentialsError(credentials, { realm: REALM, secretName: "ADMIN_TOKEN" });
  // Checking a token needs no database, so a correct one is always let in, even from an address
  // whose other clients are refused for wrong tokens: the shield only limits wrong guesses.
  const token = await tokenMatching(credentials.token, tokens);
  if (!token) {
    const shieldName = `admin:${clientAddress(c.req.header("CF-Connecting-IP"))}`;
    const challenge = `Bearer realm="${REALM}", error="invalid_token"`;
    const message =
      "The admin API needs Authorization: Bearer <admin token> (ADMIN_TOKEN or one of ADMIN_TOKENS).";
    throw await failedGuess(c.env, shieldName, message, challenge);
  }
  if (!mayUseMethod(token.access, c.req.method))
    throw new ApiError(
      "forbidden",
      `The admin token "${token.name}" is read-only (ADMIN_READ_TOKENS): it may view keys, usage and the audit trail, not change them.`,
    );
  c.set("adminActor", token.name);
  c.set("adminAccess", token.access);
  await next();
});
