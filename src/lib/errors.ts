/** The closed list of error codes and the HTTP status each one always carries. */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  key_revoked: 409,
  endpoint_removed: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  quota_exceeded: 429,
  key_banned: 429,
  internal_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  status: number;
}

export class ApiError extends Error {
  readonly status: (typeof ERROR_STATUS)[ErrorCode];
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}

/** 503 with Retry-After: a dependency is unavailable, and the same request may succeed shortly. */
export function unavailable(message: string): ApiError {
  return new ApiError("service_unavailable", message, { "Retry-After": "1" });
}

/** What is wrong with a page cursor this API did not issue, after "cursor: ". */
export const NOT_A_CURSOR =
  "is not a cursor returned by this API (malformed or altered); restart from the first page.";

/** A page cursor this API did not issue (made up, altered, or for another list): 400. */
export function invalidCursor(): ApiError {
  return new ApiError("invalid_request", `cursor: ${NOT_A_CURSOR}`);
}

/**
 * The most segments of a field's path an error message shows: a body nested thousands deep
 * would otherwise be named by a path of that many segments (kilobytes of `x.0.0.0…`). More than
 * any path a valid request has (`meta` nests at most 8 levels).
 */
export const MAX_SHOWN_PATH_SEGMENTS = 10;

/**
 * A field's path as an error message names it (`limits.perMinute`, `meta.tags.0`): its segments
 * joined by dots, up to MAX_SHOWN_PATH_SEGMENTS of them, then `…` for the rest.
 */
export function shownPath(path: readonly PropertyKey[]): string {
  const shown = path.slice(0, MAX_SHOWN_PATH_SEGMENTS).map(String).join(".");
  return path.length > MAX_SHOWN_PATH_SEGMENTS ? `${shown}.…` : shown;
}
