import type { z } from "@hono/zod-openapi";
import { type KeyRecord, keyStatus } from "../../db/keys";
import { fromBase64Url, toBase64Url } from "../../lib/encoding";
import { ApiError } from "../../lib/errors";
import type { KeyUsage } from "../../objects/quota-limiter";
import type { KeyDetailSchema, KeySchema } from "../../schemas/keys";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function keyView(k: KeyRecord, now: number): z.infer<typeof KeySchema> {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    plan: k.plan,
    limits: k.limits,
    status: keyStatus(k, now),
    createdAt: iso(k.createdAt)!,
    updatedAt: iso(k.updatedAt)!,
    revokedAt: iso(k.revokedAt),
    expiresAt: iso(k.expiresAt),
  };
}

export function usageView(u: KeyUsage | null): z.infer<typeof KeyDetailSchema>["usage"] {
  if (!u) return null;
  return {
    minute: { ...u.minute, resetAt: iso(u.minute.resetAt)! },
    day: { ...u.day, resetAt: iso(u.day.resetAt)! },
    bannedUntil: iso(u.bannedUntil),
  };
}

/** Page cursors of the key list: opaque base64url of the last (createdAt, id). */
export function encodeKeyCursor(k: KeyRecord): string {
  return toBase64Url(new TextEncoder().encode(JSON.stringify([k.createdAt, k.id])));
}

export function decodeKeyCursorOrThrow(cursor: string): { createdAt: number; id: string } {
  try {
    const [createdAt, id] = JSON.parse(
      new TextDecoder().decode(fromBase64Url(cursor)),
    ) as unknown[];
    if (typeof createdAt === "number" && typeof id === "string") return { createdAt, id };
  } catch {
    // fall through to the 400 below
  }
  throw new ApiError("invalid_request", "cursor: is not a cursor returned by this API.");
}
