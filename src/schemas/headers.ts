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
