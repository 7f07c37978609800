import type { z } from "@hono/zod-openapi";
import type { FieldChanges, StoredAuditEntry } from "../../db/audit";
import { type KeyRecord, keyStatus } from "../../db/keys";
import { prefersNamedMediaType } from "../../lib/accept";
import { isoTime } from "../../lib/clock";
import { signedTag, TAG_BYTES, verifyTagUnderAny } from "../../lib/crypto";
import { fromBase64Url, toBase64Url } from "../../lib/encoding";
import { invalidCursor } from "../../lib/errors";
import type { KeyUsage } from "../../quota/windows";
import type { AuditEntrySchema } from "../../schemas/audit";
import type { KeyDetailSchema, KeySchema } from "../../schemas/keys";

export function keyView(k: KeyRecord, now: number): z.infer<typeof KeySchema> {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    plan: k.plan,
    limits: k.limits,
    status: keyStatus(k, now),
    createdAt: isoTime(k.createdAt),
    updatedAt: isoTime(k.updatedAt),
    revokedAt: isoTime(k.revokedAt),
    expiresAt: isoTime(k.expiresAt),
    disabledAt: isoTime(k.disabledAt),
    ownerId: k.ownerId,
    meta: k.meta as z.infer<typeof KeySchema>["meta"],
    region: k.region,
    rolledAt: isoTime(k.rolledAt),
    previousSecretExpiresAt: isoTime(k.previousSecretExpiresAt),
  };
}

// The fields an operator sets, as the key views show them: what the audit trail compares.
const AUDITED_FIELDS = (k: KeyRecord): Record<string, unknown> => ({
  name: k.name,
  plan: k.plan,
  limits: k.limits,
  enabled: k.disabledAt === null,
  expiresAt: isoTime(k.expiresAt),
  revokedAt: isoTime(k.revokedAt),
  ownerId: k.ownerId,
  meta: k.meta,
  region: k.region,
});

/** The fields that differ between two states of a key, before → after (`before` null: a new key). */
export function fieldChanges(before: KeyRecord | null, after: KeyRecord): FieldChanges {
  const old = before ? AUDITED_FIELDS(before) : {};
  const changes: FieldChanges = {};
  for (const [field, value] of Object.entries(AUDITED_FIELDS(after))) {
    const previous = before ? old[field] : null;
    if (JSON.stringify(previous) !== JSON.stringify(value))
      changes[field] = { before: previous ?? null, after: value ?? null };
  }
  return changes;
}

export function auditEntryView(e: StoredAuditEntry): z.infer<typeof AuditEntrySchema> {
  return {
    id: e.id,
    at: isoTime(e.at),
    actor: e.actor,
    action: e.action,
    keyId: e.keyId,
    changes: e.changes,
    requestId: e.requestId,
    clientRequestId: e.clientRequestId,
  };
}

/**
 * A page of at most `limit` rows, from `rows` read with one more than `limit` (so a next page
 * is known to exist without a second query), and the cursor of the next page or null: the values
 * the page ends on (`valuesOf` its last row), signed for `list` (admin-v2) under the current
 * CURSOR_SECRET, the first of `secrets` (asked for only when there is a next page).
 */
export async function pageOf<T>(
  rows: T[],
  limit: number,
  next: {
    secrets: () => readonly string[];
    list: AdminList;
    valuesOf: (last: T) => CursorValue[];
  },
): Promise<{ page: T[]; nextCursor: string | null }> {
  const page = rows.slice(0, limit);
  if (rows.length <= limit) return { page, nextCursor: null };
  // The current CURSOR_SECRET comes first (cursorSecretsAcceptedOrThrow throws without one).
  const secret = next.secrets()[0]!;
  const values = next.valuesOf(page[page.length - 1]!);
  return { page, nextCursor: await encodeSignedCursor(secret, next.list, values) };
}

/**
 * A formula trigger at the start of a cell, after any leading whitespace a spreadsheet skips; or
 * after a `,` or `;` inside it, where a spreadsheet that ignores the quotes starts a cell.
 */
const FORMULA_START = /(^|[,;])(?=[\s\u00a0\u3000]*?[=+\-@\t\r])/g;

/**
 * One CSV field (RFC 4180), safe in every spreadsheet: always quoted, so no locale's separator
 * (`,` or `;`) splits it, and defused against formulas (=, +, -, @, tab or CR at its start or
 * after a separator inside it, also after whitespace) by an apostrophe at the start of that piece.
 */
function csvField(value: unknown): string {
  const raw = value === null || value === undefined ? "" : String(value);
  const text = raw.replace(FORMULA_START, "$1'");
  return `"${text.replaceAll('"', '""')}"`;
}

/** A CSV document (header row, then one row per record), CRLF line ends as RFC 4180 asks. */
export function toCsv(columns: string[], rows: unknown[][]): string {
  return `${[columns, ...rows].map((r) => r.map(csvField).join(",")).join("\r\n")}\r\n`;
}

/**
 * Whether the client asked for CSV rather than JSON: `text/csv` named with a q above 0 and at
 * least JSON's (`text/csv;q=0` or `application/json, text/csv;q=0.9` is JSON).
 */
export function wantsCsv(accept: string | undefined): boolean {
  return prefersNamedMediaType(accept, { named: "text/csv", over: "application/json" });
}

/**
 * The operator API's page cursors. Each is made for one list and holds, as a JSON array, the
 * values the page continues after. Two formats (compat/release.json):
 * - admin-v2, what this release issues: the JSON array and its 16-byte HMAC-SHA-256 tag under
 *   CURSOR_SECRET over `admin:<list>:<array>`, base64url, so an altered or made-up cursor, or one
 *   of another list, is refused (400). Checked against CURSOR_SECRET and, during a rotation, the
 *   one before.
 * - admin-v1, what the release before issued and this one still reads (a client may hold one
 *   across a deploy, and a rollback and roll forward pass them back): base64url of the JSON
 *   array, unsigned, only its values checked.
 */
export type AdminList = "keys" | "webhooks" | "deliveries" | "audit" | "usage-day";

export type CursorValue = number | string;
const encoder = new TextEncoder();

/** What the tag of an admin-v2 cursor of `list` covers: the list's name, then the values. */
const taggedBytes = (list: AdminList, payload: Uint8Array) => {
  const prefix = encoder.encode(`admin:${list}:`);
  const bytes = new Uint8Array(prefix.length + payload.length);
  bytes.set(prefix);
  bytes.set(payload, prefix.length);
  return bytes;
};

/** admin-v2: an admin-v1 payload and its tag under `secret`, for `list` only. */
export async function encodeSignedCursor(
  secret: string,
  list: AdminList,
  values: CursorValue[],
): Promise<string> {
  const payload = encoder.encode(JSON.stringify(values));
  const token = new Uint8Array(payload.length + TAG_BYTES);
  token.set(payload);
  token.set(await signedTag(secret, taggedBytes(list, payload)), payload.length);
  return toBase64Url(token);
}

/** Whether `value` could be in a cursor this API issued: ids and times are whole and ≥ 0. */
const issuedValue = {
  number: (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0,
  string: (value: unknown) => typeof value === "string" && value.length > 0,
};

/** The values of a JSON array payload if they are of the kinds given, else null. */
function valuesOf(payload: Uint8Array, types: ("number" | "string")[]): CursorValue[] | null {
  try {
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(payload);
    const values = JSON.parse(text);
    if (
      Array.isArray(values) &&
      values.length === types.length &&
      types.every((type, i) => issuedValue[type](values[i])) &&
      JSON.stringify(values) === text
    )
      return values as CursorValue[];
  } catch {
    // not a JSON array of the values: null below
  }
  return null;
}

/**
 * The values `cursor` continues after, if it is an admin-v1 cursor of these kinds, or an
 * admin-v2 cursor this API signed for `list`; else 400. `secrets`: the CURSOR_SECRETs accepted
 * (cursorSecretsAcceptedOrThrow), asked for only when the cursor is signed.
 */
async function decodeValuesOrThrow(
  secrets: () => readonly string[],
  list: AdminList,
  cursor: string,
  types: ("number" | "string")[],
): Promise<CursorValue[]> {
  const invalid = invalidCursor;
  let token: Uint8Array;
  try {
    token = fromBase64Url(cursor);
  } catch {
    throw invalid();
  }
  // Decoding ignores the unused low bits of the last character: only the canonical spelling is ours.
  if (toBase64Url(token) !== cursor) throw invalid();
  const unsigned = valuesOf(token, types);
  if (unsigned) return unsigned;
  if (token.length <= TAG_BYTES) throw invalid();
  const payload = token.slice(0, token.length - TAG_BYTES);
  const tag = token.slice(token.length - TAG_BYTES);
  if (!(await verifyTagUnderAny(secrets(), taggedBytes(list, payload), tag))) throw invalid();
  return valuesOf(payload, types) ?? Promise.reject(invalid());
}

export async function decodeCursorOrThrow<T extends "number" | "string">(
  secrets: () => readonly string[],
  list: AdminList,
  cursor: string,
  type: T,
): Promise<T extends "number" ? number : string> {
  const [value] = await decodeValuesOrThrow(secrets, list, cursor, [type]);
  return value as T extends "number" ? number : string;
}

export function usageView(u: KeyUsage | null): z.infer<typeof KeyDetailSchema>["usage"] {
  if (!u) return null;
  return {
    minute: { ...u.minute, resetAt: isoTime(u.minute.resetAt) },
    day: { ...u.day, resetAt: isoTime(u.day.resetAt) },
    bannedUntil: isoTime(u.bannedUntil),
  };
}

/** What the key list's page cursors (and the webhook endpoints' and deliveries') hold: (createdAt, id). */
export const keyCursorValues = (k: Pick<KeyRecord, "createdAt" | "id">): CursorValue[] => [
  k.createdAt,
  k.id,
];

export async function decodeKeyCursorOrThrow(
  secrets: () => readonly string[],
  list: AdminList,
  cursor: string,
): Promise<{ createdAt: number; id: string }> {
  const [createdAt, id] = await decodeValuesOrThrow(secrets, list, cursor, ["number", "string"]);
  return { createdAt: createdAt as number, id: id as string };
}
