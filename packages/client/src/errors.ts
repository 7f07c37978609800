/**
 * The errors the client throws: `ApiError` for an answer that was not a success (and its
 * `RateLimitError` subclass for a 429), `NetworkError` when no answer came at all (and its
 * `TimeoutError` subclass when an attempt ran out of time).
 *
 * They keep what a program needs as plain fields (`code`, `status`, `requestId`, `retryAfter`),
 * and the Response and the parsed body out of sight (non-enumerable), so an uncaught error prints
 * its message, its stack and those few fields instead of the whole Response.
 */
import type { components } from "./schema.js";

/** The default error body: `{code, message, status}`. */
export type ErrorBody = components["schemas"]["Error"];
/** Every machine-readable error code the API documents. */
export type ErrorCode = ErrorBody["code"];

/** What the client reads from an error body, whichever of the two shapes the server sent. */
export interface ParsedErrorBody {
  code: ErrorCode | undefined;
  message: string | undefined;
  status: number | undefined;
  /** The RFC 9457 problem type URI (`type`), when the body was problem details. */
  type: string | undefined;
}

const field = (body: Record<string, unknown>, name: string): string | undefined =>
  typeof body[name] === "string" && body[name] !== "" ? (body[name] as string) : undefined;

/**
 * Reads an error body of either shape the API sends: the default `{code, message, status}`, or
 * RFC 9457 problem details (`application/problem+json`: `type`, `title`, `status`, `detail` and
 * `code`). The message is `message`, else `detail`, else `title`. Anything else (a proxy's HTML
 * page, an empty body) gives all fields undefined.
 */
export function parseErrorBody(body: unknown): ParsedErrorBody {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return { code: undefined, message: undefined, status: undefined, type: undefined };
  const b = body as Record<string, unknown>;
  return {
    code: field(b, "code") as ErrorCode | undefined,
    message: field(b, "message") ?? field(b, "detail") ?? field(b, "title"),
    status: typeof b.status === "number" && Number.isInteger(b.status) ? b.status : undefined,
    type: field(b, "type"),
  };
}

/** `Retry-After` as whole seconds when it is delay-seconds (what the API sends), else undefined. */
function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get("Retry-After")?.trim();
  return value && /^\d+$/.test(value) ? Number(value) : undefined;
}

/** Defines `name` on a class's prototype, so it is not an own property printed with each error. */
function nameClass(cls: { prototype: Error }, name: string): void {
  Object.defineProperty(cls.prototype, "name", { value: name, writable: true, configurable: true });
}

/** Adds a property that code can read but that `console.log` and uncaught-error output skip. */
function hidden<T extends object>(target: T, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: false, writable: false });
}

/** An answer from the API that was not a success, with the code and message of its error body. */
export class ApiError extends Error {
  /** The error code of the body (`not_found`, `rate_limited`…); undefined when the body had none. */
  readonly code: ErrorCode | undefined;
  /** The HTTP status. */
  readonly status: number;
  /** `X-Request-Id` of the answer: quote it when you report a problem. */
  readonly requestId: string | undefined;
  /** Seconds the server asked to wait before trying again (`Retry-After`), if it did. */
  readonly retryAfter: number | undefined;
  /** The problem type URI when the body was RFC 9457 problem details. */
  declare readonly type: string | undefined;
  /** The parsed error body as it came (JSON, or the text when it was not JSON). */
  declare readonly body: unknown;
  /** The Response itself (its body already read). */
  declare readonly response: Response;

  constructor(response: Response, body: unknown) {
    const parsed = parseErrorBody(body);
    super(parsed.message ?? (response.statusText || "request failed"));
    this.code = parsed.code;
    this.status = response.status;
    this.requestId = response.headers.get("X-Request-Id") ?? undefined;
    this.retryAfter = retryAfterSeconds(response.headers);
    hidden(this, "type", parsed.type);
    hidden(this, "body", body);
    hidden(this, "response", response);
  }

  /** One line: `ApiError: 404 not_found: Pet 7 not found (request 5f2c…)`. */
  override toString(): string {
    const extra = [
      this.requestId && `request ${this.requestId}`,
      this.retryAfter !== undefined && `retry after ${this.retryAfter} s`,
    ].filter(Boolean);
    const suffix = extra.length ? ` (${extra.join(", ")})` : "";
    return `${this.name}: ${this.status} ${this.code ?? "error"}: ${this.message}${suffix}`;
  }
}
nameClass(ApiError, "ApiError");

/**
 * A 429: the per-minute limit (`rate_limited`), the daily quota (`quota_exceeded`) or a
 * temporary ban (`key_banned`). `retryAfter` says when a request can succeed again.
 */
export class RateLimitError extends ApiError {}
nameClass(RateLimitError, "RateLimitError");

/** The ApiError for `response` and its parsed body: a RateLimitError for a 429. */
export function apiErrorFor(response: Response, body: unknown): ApiError {
  return response.status === 429
    ? new RateLimitError(response, body)
    : new ApiError(response, body);
}

/** No answer arrived: the connection failed or was cut, or every attempt ran out of time. */
export class NetworkError extends Error {
  /** The request's method. */
  readonly method: string;
  /** The request's URL. */
  readonly url: string;
  /** How many times the request was sent. */
  readonly attempts: number;

  constructor(method: string, url: string, attempts: number, cause: unknown) {
    const reason = cause instanceof Error ? causeText(cause) : String(cause);
    super(
      `${method} ${url} failed after ${attempts} attempt${attempts === 1 ? "" : "s"}: ${reason}`,
      { cause },
    );
    this.method = method;
    this.url = url;
    this.attempts = attempts;
  }
}
nameClass(NetworkError, "NetworkError");

/** Every attempt of the request ran out of time (`timeoutMs`) before an answer arrived. */
export class TimeoutError extends NetworkError {}
nameClass(TimeoutError, "TimeoutError");

/**
 * `fetch failed (ECONNREFUSED)`: undici's TypeError says only "fetch failed", and keeps the
 * reason (a system error's code, else a message) in its own cause.
 */
function causeText(error: Error): string {
  const inner = error.cause as { code?: unknown; message?: unknown } | undefined;
  const reason =
    typeof inner?.code === "string"
      ? inner.code
      : typeof inner?.message === "string"
        ? inner.message
        : undefined;
  return reason && !error.message.includes(reason) ? `${error.message} (${reason})` : error.message;
}
