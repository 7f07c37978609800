import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { DatabaseError } from "./db/database-error";

/** The closed list of error codes and the HTTP status each one always carries. */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_in_flight: 409,
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

interface ErrorBody {
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

export function errorResponse(c: Context, err: ApiError): Response {
  for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
  const body: ErrorBody = { code: err.code, message: err.message, status: err.status };
  return c.json(body, err.status);
}

/** Maps every failure, from any layer, to an Error body; details go to the log, never the client. */
export const onError: ErrorHandler = (err, c) => {
  if (err instanceof ApiError) return errorResponse(c, err);
  if (err instanceof DatabaseError) {
    console.error(JSON.stringify({ level: "error", msg: "database failure", requestId: c.get("requestId"), error: String(err.cause) }));
    return errorResponse(c, unavailable("The database is temporarily unavailable; retry shortly."));
  }
  if (err instanceof HTTPException && err.status < 500) {
    // Thrown by Hono itself (e.g. malformed JSON in a body): keep its status, in our shape.
    const code = ERROR_CODES.find((k) => ERROR_STATUS[k] === err.status) ?? "invalid_request";
    return errorResponse(c, new ApiError(code, err.message || "The request is invalid."));
  }
  console.error(JSON.stringify({ level: "error", msg: "unhandled exception", requestId: c.get("requestId"), error: err instanceof Error ? `${err.name}: ${err.message}\n${err.stack}` : String(err) }));
  return errorResponse(c, new ApiError("internal_error", "An unexpected error occurred."));
};

export const notFound: NotFoundHandler = (c) =>
  errorResponse(c, new ApiError("not_found", `No resource at ${c.req.method} ${c.req.path}.`));

export function methodNotAllowedResponse(c: Context, allowed: string[]): Response {
  return errorResponse(
    c,
    new ApiError("method_not_allowed", `${c.req.method} is not allowed on ${c.req.path}; allowed: ${allowed.join(", ")}.`, { Allow: allowed.join(", ") }),
  );
}
