import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError, shownPath } from "../lib/errors";
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

/** Where the string that opens at `text[open]` (a `"`) closes: the index of its closing `"`, or -1. */
function closingQuote(text: string, open: number): number {
  for (let at = text.indexOf('"', open + 1); at >= 0; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === 92) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return -1;
}

/** One object or array being read: the names its object has had, and where in it the reader is. */
interface Level {
  names?: Set<string>;
  at: string | number;
  expectsName: boolean;
}

/**
 * The first member name that one object in `text` gives twice, with the path to that object (its
 * members' names and array indices), if `text` has one. Reads JSON text as written (a name spelled
 * with escapes is the name it means); on text that is not JSON the answer means nothing.
 */
export function firstRepeatedMember(
  text: string,
): { path: (string | number)[]; name: string } | undefined {
  const levels: Level[] = [];
  for (let i = 0; i < text.length; i++) {
    const top = levels[levels.length - 1];
    switch (text.charCodeAt(i)) {
      case 123: // {
        levels.push({ names: new Set(), at: "", expectsName: true });
        break;
      case 91: // [
        levels.push({ at: 0, expectsName: false });
        break;
      case 125: // }
      case 93: // ]
        levels.pop();
        break;
      case 44: // ,
        if (top?.names) top.expectsName = true;
        else if (top) top.at = (top.at as number) + 1;
        break;
      case 34: {
        // "
        const close = closingQuote(text, i);
        if (close < 0) return undefined;
        if (top?.names && top.expectsName) {
          const raw = text.slice(i + 1, close);
          let name = raw;
          try {
            if (raw.includes("\\")) name = JSON.parse(`"${raw}"`) as string;
          } catch {
            return undefined;
          }
          if (top.names.has(name))
            return { path: levels.slice(0, -1).map((level) => level.at), name };
          top.names.add(name);
          top.at = name;
          top.expectsName = false;
        }
        i = close;
      }
    }
  }
  return undefined;
}

// Request.json() and .text() replace malformed UTF-8 with U+FFFD, so "a\xffb" would be stored as
// "a�b" and answered 201. JSON text must be UTF-8 (RFC 8259 §8.1): decode fatally and refuse with
// 400. The validator's c.req.json() then decodes the same cached bytes, now known to be sound.
// A member name given twice in one object is refused too: JSON.parse keeps the last, other
// parsers (a proxy's, a firewall's, a log reader's) the first, so they would disagree with the
// store about what was sent (RFC 8259 §4: names SHOULD be unique).
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
const requireUtf8: MiddlewareHandler = async (c, next) => {
  let text: string;
  try {
    text = utf8.decode(await c.req.arrayBuffer());
  } catch {
    throw new ApiError("invalid_request", "body: must be well-formed UTF-8 (RFC 8259 §8.1).");
  }
  const repeated = firstRepeatedMember(text);
  if (repeated && isJson(text)) {
    const where = repeated.path.length ? shownPath(repeated.path) : "body";
    throw new ApiError(
      "invalid_request",
      `${where}: member ${JSON.stringify(repeated.name)} is given more than once (each member name once).`,
    );
  }
  await next();
};

/** Whether `text` parses as JSON (a body that does not is refused later, in the parser's words). */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

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
