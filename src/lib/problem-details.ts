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

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
}

/** The media ranges of an Accept header, lower-cased; a range with an unreadable q is dropped. */
function mediaRanges(accept: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const part of accept.split(",")) {
    const [range, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    const [type, subtype, extra] = (range ?? "").split("/");
    if (!type || !subtype || extra !== undefined) continue;
    let q = 1;
    const qParam = params.find((p) => /^q\s*=/.test(p));
    if (qParam !== undefined) {
      const value = qParam.replace(/^q\s*=\s*/, "");
      // RFC 9110 §12.4.2: 0, 1 or a decimal fraction of at most three digits.
      if (!/^(0(\.\d{0,3})?|1(\.0{0,3})?)$/.test(value)) continue;
      q = Number(value);
    }
    ranges.push({ type, subtype, q });
  }
  return ranges;
}

/**
 * The q the ranges give `type/subtype`, from the most specific range that matches it (RFC 9110
 * §12.5.1), with whether that range named it exactly; q 0 when none matches.
 */
function qualityOf(ranges: MediaRange[], type: string, subtype: string) {
  let best: { q: number; specificity: number } = { q: 0, specificity: -1 };
  for (const r of ranges) {
    const specificity =
      r.type === type && r.subtype === subtype
        ? 2
        : r.type === type && r.subtype === "*"
          ? 1
          : r.type === "*" && r.subtype === "*"
            ? 0
            : -1;
    if (specificity > best.specificity) best = { q: r.q, specificity };
  }
  return { q: best.q, exact: best.specificity === 2 };
}

/**
 * Whether an error answer to a request with this Accept header should be problem details rather
 * than the default `{code, message, status}`: only when the client names
 * `application/problem+json` itself with a q above 0 and at least that of `application/json`.
 * No Accept, a wildcard (any type, any application type) or a problem+json ranked below JSON
 * keeps the default.
 */
export function prefersProblemJson(accept: string | undefined): boolean {
  if (!accept) return false;
  const ranges = mediaRanges(accept);
  const problem = qualityOf(ranges, "application", "problem+json");
  const json = qualityOf(ranges, "application", "json");
  return problem.exact && problem.q > 0 && problem.q >= json.q;
}
