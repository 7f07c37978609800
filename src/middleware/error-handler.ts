import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { DatabaseError } from "../db/database-error";
import { ConfigError } from "../lib/config";
import { ApiError, ERROR_CODES, ERROR_STATUS, type ErrorBody, unavailable } from "../lib/errors";
import { describeError, log } from "../lib/log";
import {
  PROBLEM_JSON,
  PROBLEM_TITLES,
  type ProblemBody,
  prefersProblemJson,
  problemTypeUri,
} from "../lib/problem-details";

/**
 * The response of `c` for `err`, with its headers: the Error body `{code, message, status}`, or
 * RFC 9457 problem details when the request's Accept prefers `application/problem+json`. Every
 * error answer of the service is made here, so both shapes always say the same thing.
 */
export function errorResponse(c: Context, err: ApiError): Response {
  for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
  // The body depends on Accept (errors are never stored, but say so for any cache in between).
  c.header("Vary", "Accept", { append: true });
  if (prefersProblemJson(c.req.header("Accept"))) {
    const problem: ProblemBody = {
      // A misconfigured deployment (ConfigError) has no validated config: relative types then.
      type: problemTypeUri(c.var.config?.PUBLIC_ORIGIN ?? "", err.code),
      title: PROBLEM_TITLES[err.code],
      status: err.status,
      detail: err.message,
      code: err.code,
    };
    return c.body(JSON.stringify(problem), err.status, { "Content-Type": PROBLEM_JSON });
  }
  const body: ErrorBody = { code: err.code, message: err.message, status: err.status };
  return c.json(body, err.status);
}

/** Maps every failure, from any layer, to an Error body; details go to the log, never the client. */
export const onError: ErrorHandler = (err, c) => {
  if (err instanceof ApiError) return errorResponse(c, err);
  if (err instanceof DatabaseError) {
    log("error", "database failure", { error: String(err.cause) });
    return errorResponse(c, unavailable("The database is temporarily unavailable; retry shortly."));
  }
  if (err instanceof ConfigError) {
    // Already logged once, naming the setting, where it was found.
    return errorResponse(
      c,
      new ApiError("internal_error", "The service is misconfigured; the operator has been told."),
    );
  }
  if (err instanceof HTTPException && err.status < 500) {
    // Thrown by Hono itself (e.g. malformed JSON in a body): keep its status, in our shape.
    const code = ERROR_CODES.find((k) => ERROR_STATUS[k] === err.status) ?? "invalid_request";
    return errorResponse(c, new ApiError(code, err.message || "The request is invalid."));
  }
  log("error", "unhandled exception", { error: describeError(err) });
  return errorResponse(c, new ApiError("internal_error", "An unexpected error occurred."));
};

export const notFound: NotFoundHandler = (c) =>
  errorResponse(c, new ApiError("not_found", `No resource at ${c.req.method} ${c.req.path}.`));

export function methodNotAllowedResponse(c: Context, allowed: string[]): Response {
  const message = `${c.req.method} is not allowed on ${c.req.path}; allowed: ${allowed.join(", ")}.`;
  return errorResponse(
    c,
    new ApiError("method_not_allowed", message, { Allow: allowed.join(", ") }),
  );
}
