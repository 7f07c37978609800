import { prefersNamedMediaType } from "./accept";
import type { ErrorCode } from "./errors";

/** The media type of an RFC 9457 problem details body. */
export const PROBLEM_JSON = "application/problem+json";

/** The path of each error code's problem type, under the service's PUBLIC_ORIGIN. */
export const PROBLEM_TYPE_PATH = "/problems/";

/**
 * One short title per error code: an RFC 9457 `title` is the same for every occurrence of its
 * type; what happened this time is in `detail`.
 */
export const PROBLEM_TITLES: Record<ErrorCode, string> = {
  invalid_request: "Invalid request",
  unauthorized: "Unauthorized",
  forbidden: "Forbidden",
  not_found: "Not found",
  method_not_allowed: "Method not allowed",
  key_revoked: "Key revoked",
  endpoint_removed: "Endpoint removed",
  payload_too_large: "Payload too large",
  unsupported_media_type: "Unsupported media type",
  idempotency_key_reused: "Idempotency key reused",
  rate_limited: "Rate limited",
  quota_exceeded: "Daily quota exceeded",
  key_banned: "Key temporarily banned",
  internal_error: "Internal error",
  service_unavailable: "Service unavailable",
};

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
}

/**
 * The problem type URI of `code`: `<PUBLIC_ORIGIN>/problems/<code>`, or the relative reference
 * `/problems/<code>` while PUBLIC_ORIGIN is "" (as the paging `Link` is: never built from the
 * request's Host).
 */
export const problemTypeUri = (publicOrigin: string, code: ErrorCode) =>
  `${publicOrigin}${PROBLEM_TYPE_PATH}${code}`;

/**
 * Whether an error answer to a request with this Accept header should be problem details rather
 * than the default `{code, message, status}`: only when the client names
 * `application/problem+json` itself with a q above 0 and at least that of `application/json`.
 * No Accept, a wildcard (any type, any application type) or a problem+json ranked below JSON
 * keeps the default.
 */
export function prefersProblemJson(accept: string | undefined): boolean {
  return prefersNamedMediaType(accept, { named: PROBLEM_JSON, over: "application/json" });
}
