import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "../lib/errors";
import { errorResponse } from "./error-handler";

const MAX_BODY_BYTES = 16 * 1024;

/** What charsetOf answers for a media type that names its charset more than once. */
const AMBIGUOUS_CHARSET = "(given more than once)";

/**
 * The charset parameter of a media type, unquoted and lower-cased, if it names one. Named twice,
 * it is ambiguous (a reader taking the last one would decode another charset than this one does),
 * and no charset: AMBIGUOUS_CHARSET.
 */
function charsetOf(mediaType: string): string | undefined {
  const charsets = mediaType
    .split(";")
    .slice(1)
    .map((parameter) => parameter.split("=", 2).map((part) => part.trim()))
    .filter(([name, value]) => name?.toLowerCase() === "charset" && value !== undefined)
    .map(([, value]) => (value ?? "").replace(/^"(.*)"$/, "$1").toLowerCase());
  return charsets.length > 1 ? AMBIGUOUS_CHARSET : charsets[0];
}

/** Every 415 says the same thing: what the body must be, and what was sent. */
function unsupportedMediaType(sentType: string | undefined, coding?: string): ApiError {
  const got = [
    sentType ? `Content-Type: ${JSON.stringify(sentType)}` : "no Content-Type",
    ...(coding ? [`Content-Encoding: ${JSON.stringify(coding)}`] : []),
  ].join(", ");
  return new ApiError(
    "unsupported_media_type",
    `The body must be uncompressed UTF-8 JSON sent with Content-Type: application/json (got ${got}).`,
  );
}

const requireJsonType: MiddlewareHandler = async (c, next) => {
  const sent = c.req.header("Content-Type")?.trim();
  const type = sent?.split(";")[0]?.trim().toLowerCase();
  // JSON text is UTF-8 (RFC 8259 §8.1): a body declared in another charset would be misread.
  const charset = sent ? charsetOf(sent) : undefined;
  if (type !== "application/json" || (charset !== undefined && charset !== "utf-8"))
    throw unsupportedMediaType(sent);
  // The body is read as sent: a compressed one would fail as "not UTF-8" (gzip) or, worse, be
  // read as plain JSON while its sender meant another coding. Refuse any coding (RFC 9110 §8.4).
  const coding = c.req.header("Content-Encoding")?.trim().toLowerCase();
  if (coding && coding !== "identity") throw unsupportedMediaType(sent, coding);
  // The route checks the media type again (@hono/zod-openapi), taking only `; name=value`
  // parameters: an empty one (`application/json;`) or a space before `;`, both allowed by
  // RFC 9110 §8.3.1, would get its bare "Unsupported Media Type". The body is known to be JSON
  // in UTF-8 by now, so the route is shown the plain type.
  if (sent !== "application/json") {
    const headers = new Headers(c.req.raw.headers);
    headers.set("Content-Type", "application/json");
    c.req.raw = new Request(c.req.raw, { headers });
  }
  await next();
};

// hono's bodyLimit checks Content-Length and also counts streamed (chunked) bodies as they
// arrive, so an oversized body is refused without being buffered whole.
const limitSize = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: (c) => {
    const message = `The body must be at most ${MAX_BODY_BYTES} bytes (16 KiB).`;
    return errorResponse(c, new ApiError("payload_too_large", message));
  },
});

// Request.json() and .text() replace malformed UTF-8 with U+FFFD, so "a\xffb" would be stored as
// "a�b" and answered 201. JSON text must be UTF-8 (RFC 8259 §8.1): decode fatally and refuse with
// 400. The validator's c.req.json() then decodes the same cached bytes, now known to be sound.
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
const requireUtf8: MiddlewareHandler = async (c, next) => {
  try {
    utf8.decode(await c.req.arrayBuffer());
  } catch {
    throw new ApiError("invalid_request", "body: must be well-formed UTF-8 (RFC 8259 §8.1).");
  }
  await next();
};

/**
 * For operations that take a JSON body: 415 for other media types or a compressed body, 413 past
 * 16 KiB, 400 for a body that is not well-formed UTF-8.
 */
export const jsonBody: MiddlewareHandler[] = [requireJsonType, limitSize, requireUtf8];

/** What an operation that takes no body accepts instead: said in each of its 400s. */
const NO_BODY_RULE = "this operation takes no body, or {}";

/** After requireJsonType and requireUtf8: the body is `{}` (whitespace aside), else a 400. */
const requireEmptyObject: MiddlewareHandler = async (c, next) => {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    body = undefined; // malformed JSON: refused below like any other non-object
  }
  if (body === null || typeof body !== "object" || Array.isArray(body))
    throw new ApiError(
      "invalid_request",
      `body: must be absent or an empty JSON object (${NO_BODY_RULE}).`,
    );
  const fields = Object.keys(body);
  if (fields.length > 0)
    throw new ApiError(
      "invalid_request",
      `unknown field${fields.length > 1 ? "s" : ""}: ${fields.join(", ")} (${NO_BODY_RULE})`,
    );
  await next();
};

/**
 * A body, if any, is JSON as jsonBody requires and holds `{}`. Any other body is refused rather
 * than ignored: a caller who expects it to choose something (a test event's type, a
 * revocation's reason) learns that it does not.
 */
const emptyOrEmptyObject: MiddlewareHandler = async (c, next) => {
  if ((await c.req.arrayBuffer()).byteLength === 0) return next();
  await requireJsonType(c, async () => {
    await requireUtf8(c, async () => {
      await requireEmptyObject(c, next);
    });
  });
};

/**
 * For operations that take no body (revoke, unban, send again, …): none, or `{}`, which some
 * clients send with every request. 413 past 16 KiB, 415 for a body that is not JSON, 400 for one
 * that is not `{}` (naming its fields).
 */
export const noBody: MiddlewareHandler[] = [limitSize, emptyOrEmptyObject];
