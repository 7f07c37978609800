import { z } from "@hono/zod-openapi";
import { dayName, dayStartOf } from "../lib/clock";
import { ERROR_CODES, NOT_A_CURSOR } from "../lib/errors";
import {
  ALLOW_HEADER,
  RATE_LIMIT_HEADERS,
  RETRY_AFTER_HEADER,
  WWW_AUTHENTICATE_HEADER,
} from "./headers";

/** Largest integer that D1 (JS numbers) and JSON clients can hold exactly: 2^53 − 1. */
export const MAX_ID = Number.MAX_SAFE_INTEGER;

export const ErrorSchema = z
  .object({
    code: z.enum(ERROR_CODES).openapi({ description: "Machine-readable error code" }),
    message: z.string().openapi({ description: "Human-readable description" }),
    status: z.number().int().openapi({ description: "The HTTP status code, repeated" }),
  })
  .openapi("Error");

/** An integer as the API reads it in a path or query string: decimal digits, no leading zeros. */
export const INTEGER_PATTERN = "^[1-9][0-9]*$";

/**
 * A path or query integer in 1..2^53−1, given as decimal digits (no sign, no exponent, no
 * fraction) without leading zeros: the one spelling of an integer everywhere in the API (`01`
 * is refused here as `limit=05` is), so one resource has one URL.
 */
export function positiveIdString(name: string, description: string) {
  return z
    .string()
    .regex(/^[0-9]+$/, `must be a positive integer`)
    .refine((s) => !/^0[0-9]/.test(s), "must be written without leading zeros")
    .transform(Number)
    .refine((n) => n >= 1, `must be at least 1`)
    .refine(
      (n) => n <= MAX_ID,
      `must be at most ${MAX_ID} (2^53−1); larger int64 values cannot be represented exactly`,
    )
    .openapi({
      param: { name, in: "path", description },
      type: "integer",
      format: "int64",
      minimum: 1,
      maximum: MAX_ID,
      // The one spelling as it appears in the URL (pattern applies to the text of the parameter).
      pattern: INTEGER_PATTERN,
      example: 1,
    });
}

/** C0 and C1 control characters and DEL (U+0000–U+001F, U+007F–U+009F). */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** Bidi embeddings, overrides and isolates: they reorder the text around them ("Trojan Source"). */
const BIDI_CONTROL = /[\u202a-\u202e\u2066-\u2069]/;
/** Line and paragraph separators: a line break inside a one-line name. */
const LINE_SEPARATOR = /[\u2028\u2029]/;
/**
 * A character that draws something: not a default-ignorable or format character (U+200B, ZWJ,
 * U+2060, U+FEFF, U+3164…), separator, combining mark, control or unassigned code point, and not
 * the blank Braille pattern U+2800.
 */
const VISIBLE = /[^\p{Default_Ignorable_Code_Point}\p{Cf}\p{Z}\p{M}\p{Cc}\p{Cs}\p{Cn}\s\u2800]/u;

/** The most characters (code points) a name may have after trimming. */
const MAX_NAME_LENGTH = 200;

/** The characters of a class regex such as /[abc]/, without its brackets. */
const classBody = (re: RegExp) => re.source.slice(1, -1);

/**
 * DisplayNameSchema's rules as one JSON Schema `pattern` (ECMA-262 with the `u` flag, as JSON
 * Schema validators compile it) over the name as sent, before trimming: optional leading and
 * trailing whitespace around 1–200 characters that start and end with a non-space character,
 * hold no forbidden character (control, bidi, line separator, lone surrogate) and at least one
 * visible one. Written from the same character classes as the checks; a property test holds the
 * two to the same answers. Its shape keeps a validator's backtracking linear in the length.
 */
const FORBIDDEN = `${classBody(CONTROL)}${classBody(BIDI_CONTROL)}${classBody(LINE_SEPARATOR)}\\p{Cs}`;
export const DISPLAY_NAME_PATTERN = `^\\s*(?=[^${FORBIDDEN}]*${VISIBLE.source})[^${FORBIDDEN}\\s](?:[^${FORBIDDEN}]{0,${MAX_NAME_LENGTH - 2}}[^${FORBIDDEN}\\s])?\\s*$`;

/**
 * `schema`, refusing what would corrupt a single line of text when stored or shown: lone
 * surrogates (stored altered), control characters (NUL cuts strings short in SQLite; a line
 * break or an escape sequence breaks a table or a terminal), bidi overrides and isolates (they
 * reorder the text after them: "Trojan Source") and line or paragraph separators. Names, owner
 * ids and webhook endpoints' descriptions are held to it. The marks U+200E and U+200F stay allowed:
 * they set the direction of the text around them only, as right-to-left text needs.
 */
export function singleLineText(schema: z.ZodString): z.ZodString {
  return schema
    .refine((s) => s.isWellFormed(), "must be well-formed Unicode (no lone surrogates)")
    .refine(
      (s) => !CONTROL.test(s),
      "must not contain control characters (U+0000–U+001F, U+007F–U+009F)",
    )
    .refine(
      (s) => !BIDI_CONTROL.test(s),
      "must not contain bidirectional overrides or isolates (U+202A–U+202E, U+2066–U+2069)",
    )
    .refine(
      (s) => !LINE_SEPARATOR.test(s),
      "must not contain line or paragraph separators (U+2028, U+2029)",
    );
}

/** singleLineText's rules as a JSON Schema `pattern` (ECMA-262 with the `u` flag). */
export const SINGLE_LINE_TEXT_PATTERN = `^[^${FORBIDDEN}]*$`;

/**
 * A display name: trimmed, 1–200 characters of single-line text (singleLineText) with at least
 * one visible character. Invisible characters inside a visible name stay allowed: emoji
 * sequences join with ZWJ (U+200D).
 */
export const DisplayNameSchema = singleLineText(
  z
    .string({ error: (i) => (i.input === undefined ? "is required" : "must be a string") })
    .trim()
    .min(1, "must not be empty or only whitespace"),
)
  // Characters, as JSON Schema's maxLength counts them: an emoji is one, not two UTF-16 units.
  .refine((s) => [...s].length <= MAX_NAME_LENGTH, `must be at most ${MAX_NAME_LENGTH} characters`)
  .refine(
    (s) => s === "" || VISIBLE.test(s),
    "must contain at least one visible character (not only invisible ones such as U+200B)",
  )
  // The refinements hide the rules from the OpenAPI generator: state them for it. maxLength is of
  // the trimmed name, which the pattern holds to 200 characters; whitespace around it is free.
  .openapi({ type: "string", minLength: 1, pattern: DISPLAY_NAME_PATTERN });

/** A calendar date YYYY-MM-DD that exists (2030-02-30 does not). */
export function isoDay(description: string) {
  // Not of the form: no second reason ("not a real date") about what is not a date at all.
  return z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, { message: "must be a date YYYY-MM-DD", abort: true })
    .refine((d) => {
      const at = dayStartOf(d);
      return Number.isFinite(at) && dayName(at) === d;
    }, "must be a real calendar date")
    .openapi({ type: "string", format: "date", description, example: "2030-06-10" });
}

/** The error of an enum of `values`: the one wording of a value outside a closed list. */
export const oneOfError = (values: readonly string[]) => ({
  error: `must be one of: ${values.join(", ")}`,
});

/** A page size as written in a query string: 1–100, no leading zeros. */
export const PAGE_LIMIT_PATTERN = "^(100|[1-9][0-9]?)$";

/** A page size query parameter: an integer 1–100 given as digits without leading zeros, 20 when absent. */
export function pageLimit(description: string) {
  return z
    .string()
    .regex(new RegExp(PAGE_LIMIT_PATTERN), "must be an integer from 1 to 100")
    .transform(Number)
    .default(20)
    .openapi({
      type: "integer",
      minimum: 1,
      maximum: 100,
      pattern: PAGE_LIMIT_PATTERN,
      default: 20,
      description,
    });
}

/**
 * The query of an operator API operation that takes no parameters: any parameter is refused
 * (400 naming it), as the operations with parameters refuse unknown ones, so an operator's typo
 * never reads as "no filter".
 */
export const NoQuerySchema = z.strictObject({});

/**
 * A list filter by an owner, an actor or a name's start: up to a name's length, so any fits, and
 * not empty (`ownerId=` matches no owner: a filter left blank is left out, not sent empty).
 */
export const nameFilter = () =>
  z
    .string()
    .min(1, "must not be empty")
    .max(MAX_NAME_LENGTH, `must be at most ${MAX_NAME_LENGTH} characters`);

/** The operator API's opaque page cursor: the `nextCursor` of the previous page. */
export const adminPageCursor = z
  .string()
  .max(200, NOT_A_CURSOR)
  .optional()
  .openapi({ description: "nextCursor of the previous page" });

/** A JSON request or response body. */
export const json = <T>(schema: T) => ({ "application/json": { schema } });

type HeaderObjects = Record<
  string,
  { description: string; schema: { type: "string" } | { type: "integer"; minimum?: number } }
>;

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Invalid request (parameter, header or body; also a malformed Authorization header)",
  401: "Missing or invalid API key",
  404: "Not found",
  405: "Method not allowed",
  409: "The key is revoked, which is final: it cannot be changed, enabled or rolled",
  410: "Endpoint removed after its sunset",
  413: "Body larger than 16 KiB",
  415: "Body is not uncompressed application/json",
  422: "Idempotency-Key reused with a different body",
  429: "Rate limit, daily quota or temporary ban",
  500: "Unexpected error",
  503: "Database temporarily unavailable (see Retry-After)",
};

/** Error responses for `statuses`, each with the headers `headersOf(status)` says it carries. */
function errorResponsesWith(
  statuses: number[],
  headersOf: (status: number) => HeaderObjects,
  descriptions: Record<number, string>,
) {
  return Object.fromEntries(
    statuses.map((s) => [
      s,
      {
        description: descriptions[s] ?? ERROR_DESCRIPTIONS[s] ?? "Error",
        headers: headersOf(s),
        content: json(ErrorSchema),
      },
    ]),
  );
}

/**
 * The headers a status carries whatever the operation: Retry-After on 429 and 503, the Bearer
 * challenge on 401 (and on the 400 of a malformed Authorization header), Allow on 405.
 */
const statusHeaders = (status: number): HeaderObjects => ({
  ...(status === 429 || status === 503 ? RETRY_AFTER_HEADER : {}),
  ...(status === 400 || status === 401 ? WWW_AUTHENTICATE_HEADER : {}),
  ...(status === 405 ? ALLOW_HEADER : {}),
});

/**
 * Error responses of the public API for `statuses`: every answer carries the key's rate-limit
 * headers (and 429/503 `Retry-After`), plus `extra` headers the operation adds to every answer.
 */
export function errorResponses(first: number | HeaderObjects, ...rest: number[]) {
  const [extra, statuses] = typeof first === "number" ? [{}, [first, ...rest]] : [first, rest];
  return errorResponsesWith(
    statuses,
    (s) => ({ ...RATE_LIMIT_HEADERS, ...statusHeaders(s), ...extra }),
    {},
  );
}

/** Error responses of a public route outside every quota (the document): no rate-limit headers. */
export function unmeteredErrorResponses(...statuses: number[]) {
  return errorResponsesWith(statuses, statusHeaders, {});
}

/**
 * Error responses of the operator API for `statuses`, and 500, which every operation answers a
 * deployment without a full-access admin token (so no operation can leave it out). It has no
 * per-key quota: only a refused admin token (401) and the client's failed-authentication limit
 * (429) carry rate-limit headers, those of the client's failure window; 429 and 503 carry
 * `Retry-After`.
 */
export function adminErrorResponses(...statuses: number[]) {
  return errorResponsesWith(
    [...statuses, 500],
    (s) => ({ ...(s === 401 || s === 429 ? RATE_LIMIT_HEADERS : {}), ...statusHeaders(s) }),
    {
      400: "Invalid request: a parameter, header or body breaks a rule, or a query parameter the operation does not take (the operator API refuses unknown ones, naming them); also a malformed Authorization header",
      401: "Missing or invalid admin token (a token that matches none carries the rate-limit headers of the client's failed-token window; a missing or malformed header does not)",
      403: "The admin token is read-only (one of ADMIN_READ_TOKENS) and this operation changes something",
      429: "Too many invalid admin tokens from this client this minute",
      500: "A misconfigured deployment (no full-access admin token, an invalid setting, or a secret the operation needs unset) or a bug; the body has no details, the log has them",
    },
  );
}
