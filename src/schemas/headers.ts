// Response headers as documented in the OpenAPI document (plain OpenAPI header objects).
import { AUTH_FAILURES_PER_MINUTE } from "../quota/windows";
import { DEPRECATION_VALUES } from "./deprecation";

type Schema = { type: "string" } | { type: "integer"; minimum?: number };
const header = (description: string, schema: Schema = { type: "string" }) => ({
  description,
  schema,
});
const integer: Schema = { type: "integer" };

export const RATE_LIMIT_HEADERS = {
  "X-RateLimit-Limit": header(
    "Limit in force for the current usage window (the one closest to exhaustion)",
    integer,
  ),
  "X-RateLimit-Remaining": header("Requests remaining in that window", integer),
  "X-RateLimit-Reset": header("Unix time (seconds) at which that window resets", integer),
  RateLimit: header(
    'IETF form, every window: "minute";r=<remaining>;t=<seconds to reset>, "day";… ("fallback" while the key\'s limiter cannot be reached)',
  ),
  "RateLimit-Policy": header(
    `IETF form: "minute";q=<limit>;w=60, "day";q=<limit>;w=86400 (the client's failed-authentication window "minute";q=${AUTH_FAILURES_PER_MINUTE};w=60 when no key could be used; "fallback";q=<per-minute limit>;w=60 while the key's limiter cannot be reached)`,
  ),
};

export const RETRY_AFTER_HEADER = {
  "Retry-After": header("Seconds to wait before retrying", { type: "integer", minimum: 1 }),
};

export const DEPRECATION_HEADERS = {
  Deprecation: header("RFC 9745 deprecation date"),
  Sunset: header(`RFC 8594 removal date: ${DEPRECATION_VALUES.Sunset}`),
  Link: header(DEPRECATION_VALUES.Link),
};

/**
 * RFC 6750 §3 challenge: on every 401, and on the 400 for a malformed Authorization header (with
 * error="invalid_request"); error="invalid_token" when a token was sent and is not usable.
 */
export const WWW_AUTHENTICATE_HEADER = {
  "WWW-Authenticate": header(
    'Bearer challenge: Bearer realm="…", with error="invalid_token" for a token that may not be used, error="invalid_request" (and error_description) for a malformed Authorization header',
  ),
};

/** On every 405: the methods the path has (HEAD with GET). */
export const ALLOW_HEADER = {
  Allow: header("The methods this path allows, comma-separated (HEAD wherever GET is)"),
};
