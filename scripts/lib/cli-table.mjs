// @ts-check
// Tables for a person at a terminal: what the keys CLI prints unless it is asked for JSON.

/**
 * @typedef {(value: unknown) => string} Format
 * @typedef {[label: string, path: string, format?: Format]} Column
 */

/** "3/300" for a window's use, "" when there is none. */
/** @type {Format} */
const usedOfLimit = (value) => {
  const window = /** @type {{ used?: number, limit?: number } | null} */ (value);
  return window && typeof window === "object" ? `${window.used}/${window.limit}` : "";
};

/** An audit entry's changes, one `field: before → after` each. */
/** @type {Format} */
const changesOf = (value) =>
  Object.entries(/** @type {Record<string, { before: unknown, after: unknown }>} */ (value ?? {}))
    .map(([field, { before, after }]) => `${field}: ${cell(before)} → ${cell(after)}`)
    .join("; ");

const EVERY_OWNER = "(every owner)";

/** A webhook endpoint's owner: null is every owner's keys, said in words. */
/** @type {Format} */
const ownerOrEvery = (value) => (value === null ? EVERY_OWNER : cell(value));

/** Whether an endpoint receives deliveries, and if not, why (an operator, or a 410 Gone). */
/** @type {Format} */
const deliveryState = (reason) => (reason ? `disabled: ${reason}` : "enabled");

/** @type {Column[]} */
const REFUSED_AND_BILLED = [
  ["admitted", "admitted"],
  ["rate limited", "refused.rate_limited"],
  ["quota exceeded", "refused.quota_exceeded"],
  ["banned", "refused.key_banned"],
  ["stranded", "stranded"],
];

/** The columns of each command that answers a list (`{ data: [...] }`). */
/** @type {Record<string, Column[]>} */
export const LIST_COLUMNS = {
  list: [
    ["id", "id"],
    ["name", "name"],
    ["plan", "plan"],
    ["status", "status"],
    ["owner", "ownerId"],
    ["today", "activity.today", usedOfLimit],
    ["last used", "activity.lastUsedDay"],
    ["banned until", "activity.bannedUntil"],
  ],
  usage: [["day", "day"], ...REFUSED_AND_BILLED],
  "usage-day": [
    ["key", "keyId"],
    ["name", "name"],
    ["plan", "plan"],
    ["owner", "ownerId"],
    ...REFUSED_AND_BILLED,
  ],
  audit: [
    ["at", "at"],
    ["actor", "actor"],
    ["action", "action"],
    ["key", "keyId"],
    ["changes", "changes", changesOf],
  ],
  "webhook-list": [
    ["id", "id"],
    ["url", "url"],
    ["owner", "ownerId", ownerOrEvery],
    ["events", "eventTypes"],
    ["state", "disabledReason", deliveryState],
  ],
  "webhook-deliveries": [
    ["id", "id"],
    ["event", "eventType"],
    ["event id", "eventId"],
    ["status", "status"],
    ["attempts", "attempts"],
    ["response", "responseStatus"],
    ["latency ms", "latencyMs"],
    ["queued", "createdAt"],
    ["error", "lastError"],
  ],
};

/**
 * The value at a dotted path of `record`.
 * @param {unknown} record
 * @param {string} path
 */
function at(record, path) {
  /** @type {any} */
  let value = record;
  for (const part of path.split(".")) value = value?.[part];
  return value;
}

/**
 * Characters a terminal acts on rather than shows: C0 and C1 controls and DEL (an escape sequence
 * recolours, retitles or clears the screen; a line break starts a row of its own), bidi
 * embeddings, overrides and isolates (they reorder the rest of the line), line and paragraph
 * separators.
 */
const TERMINAL_CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
/** @type {Record<string, string>} */
const SHORT_ESCAPES = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * `text` with each terminal control character written as its escape (`\n`, `\u001b`), so a
 * value stored by whoever wrote it (a description, a receiver's error, an audit entry) prints
 * as text on one line.
 * @param {string} text
 */
const printable = (text) =>
  text.replace(
    TERMINAL_CONTROL,
    (c) => SHORT_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );

/**
 * A value as one table cell: empty for null, a list of words comma-separated, JSON for other
 * objects, the text otherwise; terminal control characters escaped in each.
 * @param {unknown} value
 */
function cell(value) {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value) && value.every((item) => typeof item === "string"))
    return printable(value.join(", "));
  if (typeof value === "object") return printable(JSON.stringify(value));
  return printable(String(value));
}

/** East Asian wide and fullwidth characters (Hangul, CJK, kana, fullwidth forms). */
const WIDE =
  /[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{20000}-\u{3fffd}]|\p{Emoji_Presentation}|\p{Extended_Pictographic}\ufe0f|\p{Regional_Indicator}/u;
const SEGMENTER = new Intl.Segmenter();

/**
 * How many columns a terminal gives `text`: per grapheme, none for combining marks and
 * zero-width characters alone, two for wide characters and emoji, one otherwise. `length`
 * counts UTF-16 units, which would pad a name with CJK, accents or emoji out of its column.
 * @param {string} text
 */
const widthOf = (text) =>
  [...SEGMENTER.segment(text)].reduce(
    (width, { segment }) =>
      width + (/^[\p{Mn}\p{Me}\p{Cf}]+$/u.test(segment) ? 0 : WIDE.test(segment) ? 2 : 1),
    0,
  );

/**
 * Rows of text as aligned columns, a header row and a rule under it.
 * @param {string[]} header
 * @param {string[][]} rows
 */
function aligned(header, rows) {
  const widths = header.map((h, i) =>
    Math.max(widthOf(h), ...rows.map((r) => widthOf(r[i] ?? ""))),
  );
  const line = (/** @type {string[]} */ r) =>
    r
      .map((text, i) => text + " ".repeat(Math.max(0, (widths[i] ?? 0) - widthOf(text))))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "─".repeat(w))), ...rows.map(line)].join("\n");
}

/**
 * An object's fields, nested ones by their dotted path, as `field  value` lines.
 * @param {Record<string, unknown>} record
 */
function fieldsOf(record) {
  /** @type {string[][]} */
  const rows = [];
  const walk = (/** @type {Record<string, unknown>} */ object, /** @type {string} */ prefix) => {
    for (const [name, value] of Object.entries(object)) {
      const path = prefix ? `${prefix}.${name}` : name;
      if (value && typeof value === "object" && !Array.isArray(value) && name !== "meta")
        walk(/** @type {Record<string, unknown>} */ (value), path);
      else rows.push([path, cell(value)]);
    }
  };
  walk(record, "");
  return aligned(["field", "value"], rows);
}

/**
 * What `command` answered, as a table: a list's rows under its columns, or one record's fields.
 * @param {string} command
 * @param {unknown} body the parsed JSON answer
 */
export function tableOf(command, body) {
  const data = /** @type {{ data?: unknown }} */ (body)?.data;
  if (Array.isArray(data)) {
    if (data.length === 0) return "(none)";
    const columns =
      LIST_COLUMNS[command] ??
      Object.keys(data[0] ?? {}).map((/** @type {string} */ name) => [name, name]);
    return aligned(
      columns.map(([label]) => label),
      data.map((row) => columns.map(([, path, format = cell]) => format(at(row, path)))),
    );
  }
  if (body && typeof body === "object") {
    const record = /** @type {Record<string, unknown>} */ (body);
    // An endpoint without an owner is for every owner's keys: said so, not left blank.
    if (command.startsWith("webhook-") && record.ownerId === null)
      return fieldsOf({ ...record, ownerId: EVERY_OWNER });
    return fieldsOf(record);
  }
  return cell(body);
}
