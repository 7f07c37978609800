import { ApiError } from "../lib/errors";

/**
 * What an `Authorization` header holds, read strictly (RFC 9110 §11.6.2, RFC 6750 §2.1):
 * `Bearer`, case-insensitive, one or more spaces, one b64token.
 */
export type Credentials =
  | { kind: "bearer"; token: string }
  /** No Authorization header at all. */
  | { kind: "none" }
  /** Another scheme (Basic, Digest…): the client does not know this API takes Bearer. */
  | { kind: "other-scheme"; scheme: string | null }
  /** Not a well-formed credential; `problem` says what is wrong, for the client to fix. */
  | { kind: "malformed"; problem: string };

/** RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** A scheme worth naming back to the client (a short RFC 9110 token), else just "another scheme". */
const NAMEABLE_SCHEME = /^[A-Za-z][A-Za-z0-9-]{0,19}$/;

export function parseAuthorization(header: string | undefined): Credentials {
  if (header === undefined) return { kind: "none" };
  const malformed = (problem: string): Credentials => ({ kind: "malformed", problem });
  if (header.trim() === "") return malformed("the Authorization header is empty");
  // The runtime joins repeated headers with ", "; no b64token holds a comma.
  if (header.includes(",")) {
    return malformed(
      "more than one credential (two Authorization headers, or a list): send exactly one",
    );
  }
  const [, scheme = "", rest = ""] = header.match(/^([^ \t]*)(.*)$/s) ?? [];
  if (scheme.toLowerCase() !== "bearer") {
    // A bare key: the client knows the credential but not the syntax.
    if (scheme.startsWith("pet_")) return malformed("the key is sent without the Bearer scheme");
    return { kind: "other-scheme", scheme: NAMEABLE_SCHEME.test(scheme) ? scheme : null };
  }
  if (rest.trim() === "") return malformed("Bearer is followed by no token");
  if (rest.includes("\t"))
    return malformed("separate Bearer and the token with a space, not a tab");
  const token = rest.match(/^ +(\S+) *$/)?.[1];
  if (token === undefined) return malformed("the token must be a single word after Bearer");
  if (!B64TOKEN.test(token)) {
    return malformed("the token holds characters a bearer token cannot (RFC 6750 b64token)");
  }
  return { kind: "bearer", token };
}

/**
 * The error for credentials that are not a bearer token, as RFC 6750 §3.1 says: none or another
 * scheme → 401 with a bare challenge (no error code); malformed → 400 with
 * error="invalid_request". Neither is a guess at a secret, so neither counts as a failed
 * authentication.
 */
export function credentialsError(
  credentials: Exclude<Credentials, { kind: "bearer" }>,
  { realm, secretName }: { realm: string; secretName: string },
): ApiError {
  const challenge = `Bearer realm="${realm}"`;
  switch (credentials.kind) {
    case "none":
      return new ApiError(
        "unauthorized",
        `Missing ${secretName}: send Authorization: Bearer <${secretName}>.`,
        { "WWW-Authenticate": challenge },
      );
    case "other-scheme": {
      const scheme = credentials.scheme ? `the ${credentials.scheme} scheme` : "another scheme";
      return new ApiError(
        "unauthorized",
        `Authorization uses ${scheme}; send Authorization: Bearer <${secretName}>.`,
        { "WWW-Authenticate": challenge },
      );
    }
    case "malformed":
      return new ApiError(
        "invalid_request",
        `Authorization: ${credentials.problem}; send Authorization: Bearer <${secretName}>.`,
        {
          "WWW-Authenticate": `${challenge}, error="invalid_request", error_description="${credentials.problem}"`,
        },
      );
  }
}
