import type { z } from "@hono/zod-openapi";
import type { FieldChanges, StoredAuditEntry } from "../../db/audit";
import { type KeyRecord, keyStatus } from "../../db/keys";
import { isoTime } from "../../lib/clock";
import { fromBase64Url, toBase64Url } from "../../lib/encoding";
import { ApiError } from "../../lib/errors";
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
 * is known to exist without a second query), and the cursor of the next page or null.
 */
export function pageOf<T>(
  rows: T[],
  limit: number,
  cursorOf: (last: T) => string,
): { page: T[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  return { page, nextCursor: rows.length > limit ? cursorOf(page[page.length - 1]!) : null };
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

/** Whether the client asked for CSV rather than JSON. */
export function wantsCsv(accept: string | undefined): boolean {
  return /(^|,)\s*text\/csv\b/i.test(accept ?? "");
}

/** Opaque cursors: base64url of a JSON array of the values a page continues after. */
function encodeValues(values: (number | string)[]): string {
  return toBase64Url(new TextEncoder().encode(JSON.stringify(values)));
}

/** Whether `value` could be in a cursor this API issued: ids and times are whole and ≥ 0. */
const issuedValue = {
  number: (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0,
  string: (value: unknown) => typeof value === "string" && value.length > 0,
};

/** The cursor's values if they are of the kinds given, spelt as this API spells them, else a 400. */
function decodeValuesOrThrow(cursor: string, types: ("number" | "string")[]): unknown[] {
  try {
    const values = JSON.parse(new TextDecoder().decode(fromBase64Url(cursor))) as unknown[];
    if (
      Array.isArray(values) &&
      values.length === types.length &&
      types.every((type, i) => issuedValue[type](values[i])) &&
      encodeValues(values as (number | string)[]) === cursor
    )
      return values;
  } catch {
    // fall through to the 400 below
  }
  throw new ApiError("invalid_request", "cursor: is not a cursor returned by this API.");
}

/** Opaque cursors over a single value (an audit id, a key id). */
export function encodeCursor(value: number | string): string {
  return encodeValues([value]);
}

export function decodeCursorOrThrow<T extends "number" | "string">(
  cursor: string,
  type: T,
): T extends "number" ? number : string {
  return decodeValuesOrThrow(cursor, [type])[0] as T extends "number" ? number : string;
}

export function usageView(u: KeyUsage | null): z.infer<typeof KeyDetailSchema>["usage"] {
  if (!u) return null;
  return {
    minute: { ...u.minute, resetAt: isoTime(u.minute.resetAt) },
    day: { ...u.day, resetAt: isoTime(u.day.resetAt) },
    bannedUntil: isoTime(u.bannedUntil),
  };
}

/** Page cursors of the key list (and the webhook endpoints'): the last (createdAt, id). */
export function encodeKeyCursor(k: Pick<KeyRecord, "createdAt" | "id">): string {
  return encodeValues([k.createdAt, k.id]);
}

export function decodeKeyCursorOrThrow(cursor: string): { createdAt: number; id: string } {
  const [createdAt, id] = decodeValuesOrThrow(cursor, ["number", "string"]) as [number, string];
  return { createdAt, id };
}
