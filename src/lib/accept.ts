// Content negotiation by the Accept header (RFC 9110 §12.5.1), for the answers that have a
// second form beside the default: problem details for errors, CSV for the usage listings.

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
function qualityOf(ranges: MediaRange[], mediaType: string) {
  const [type, subtype] = mediaType.toLowerCase().split("/");
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
 * Whether a request with this Accept header is answered as `named` rather than as `over`, the
 * default: only when the header names `named` itself (a wildcard does not) with a q above 0 and
 * at least the q it gives `over` (a tie keeps `named`, which the client took the trouble to
 * name). No Accept, q=0 (not acceptable), or a lower q than `over` keeps the default.
 */
export function prefersNamedMediaType(
  accept: string | undefined,
  { named, over }: { named: string; over: string },
): boolean {
  if (!accept) return false;
  const ranges = mediaRanges(accept);
  const wanted = qualityOf(ranges, named);
  const fallback = qualityOf(ranges, over);
  return wanted.exact && wanted.q > 0 && wanted.q >= fallback.q;
}
