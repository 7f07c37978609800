import { z } from "@hono/zod-openapi";
import { PLAN_LIMITS, PLANS } from "../quota/plans";
import { adminPageCursor, DisplayNameSchema, nameFilter, oneOfError, pageLimit } from "./common";
import { RegionSchema } from "./region";

const PlanSchema = z.enum(PLANS, oneOfError(PLANS)).openapi("Plan");

/**
 * The largest limit a key may have: every /v1 answer states it in RateLimit-Policy, a structured
 * field whose integers have at most 15 digits (RFC 9651 §3.3.1); a larger one would make the
 * header invalid for every client of the key.
 */
const MAX_LIMIT = 999_999_999_999_999;

const count = (what: string) =>
  z
    .number({ error: `must be an integer number of requests per ${what}` })
    .int(`must be an integer number of requests per ${what}`)
    .min(1, "must be at least 1")
    .max(
      MAX_LIMIT,
      `must be at most ${MAX_LIMIT} (the RateLimit headers carry integers of at most 15 digits)`,
    );

const LimitsSchema = z
  .strictObject({ perMinute: count("minute"), perDay: count("day") })
  .openapi("Limits");

const isoDate = z.union([z.iso.datetime({ offset: true }), z.iso.date()], {
  error: "must be an ISO 8601 date or date-time",
});

/** The states a key can be in; the list filter takes the same names. */
export const KEY_STATE_NAMES = ["active", "disabled", "revoked", "expired"] as const;

/** The key list's state filter: the states, and banned (an automatic ban is on). */
export const KEY_LIST_STATES = [...KEY_STATE_NAMES, "banned"] as const;

/** Held to the same rules as a name: trimmed, visible, no control, bidi or line-separator characters. */
const OwnerIdSchema = DisplayNameSchema.openapi({
  description: "Who the key belongs to, in your own terms (a customer or account id); trimmed",
});

/** At most 2 KiB of JSON (UTF-8), as stored. */
const MAX_META_BYTES = 2048;
/** How deeply `meta` may nest: the object itself is level 1. */
const MAX_META_DEPTH = 8;

/** Whether `value` nests objects or arrays more than `levels` deep (looks no deeper than that). */
function nestsDeeperThan(value: unknown, levels: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (levels === 0) return true;
  return Object.values(value).some((member) => nestsDeeperThan(member, levels - 1));
}

/**
 * Whether, within `levels` levels of objects and arrays in `value`, a member name passes `name`
 * or a string passes `text`.
 */
function someWithin(
  value: unknown,
  levels: number,
  test: { name: (name: string) => boolean; text?: (text: string) => boolean },
): boolean {
  if (typeof value === "string") return test.text?.(value) ?? false;
  if (value === null || typeof value !== "object" || levels === 0) return false;
  if (!Array.isArray(value) && Object.keys(value).some(test.name)) return true;
  return Object.values(value).some((member) => someWithin(member, levels - 1, test));
}

const notWellFormed = (text: string) => !text.isWellFormed();

// The depth is checked before the JSON schema walks the value: that walk recurses once per
// level, and a value nested thousands deep would overflow the stack (a 500, not a 400).
const MetaSchema = z
  .unknown()
  .refine(
    (m) => !nestsDeeperThan(m, MAX_META_DEPTH),
    `must nest at most ${MAX_META_DEPTH} levels of objects and arrays`,
  )
  // The JSON schema's walk drops a member named "__proto__", so the key would be stored without
  // it: refused instead.
  .refine(
    (m) => !someWithin(m, MAX_META_DEPTH + 1, { name: (name) => name === "__proto__" }),
    'must not have a member named "__proto__" (it cannot be stored as sent)',
  )
  // A lone UTF-16 surrogate (legal as a JSON escape, "\ud800"): names and owner ids refuse them
  // (singleLineText), and so does meta, so a strict UTF-8 reader of a key view never meets one.
  .refine(
    (m) => !someWithin(m, MAX_META_DEPTH + 1, { name: notWellFormed, text: notWellFormed }),
    "must be well-formed Unicode (no lone surrogates)",
  )
  .pipe(
    z
      .record(z.string(), z.json(), { error: "must be a JSON object" })
      .refine(
        (m) => new TextEncoder().encode(JSON.stringify(m)).length <= MAX_META_BYTES,
        `must be at most ${MAX_META_BYTES} bytes of JSON`,
      ),
  )
  .openapi({
    type: "object",
    additionalProperties: true,
    description: `Your own data about the key: a JSON object of at most ${MAX_META_BYTES} bytes, nested at most ${MAX_META_DEPTH} levels deep`,
  });

/** The Limits schema as the documents name it (a component, like every named schema). */
const LIMITS_REF = { $ref: "#/components/schemas/Limits" };

/** The plans whose limits come from the plan table: their keys may not carry `limits`. */
const TABLE_PLANS = Object.keys(PLAN_LIMITS);

/**
 * "limits only, and always, on enterprise keys" as JSON Schema, for the create body: exactly one
 * of an enterprise key with limits, or a key of a table plan without them. The handler enforces
 * the same rule (ownLimitsOrThrow in routes/admin) with a message that names it.
 */
const ENTERPRISE_LIMITS_RULE = {
  oneOf: [
    {
      title: "Enterprise key: its own limits",
      properties: { plan: { const: "enterprise" }, limits: LIMITS_REF },
      required: ["plan", "limits"],
    },
    {
      title: "Plan-table key: no limits",
      properties: { plan: { enum: TABLE_PLANS }, limits: false },
      required: ["plan"],
    },
  ],
};

export const CreateKeySchema = z
  .strictObject({
    name: DisplayNameSchema,
    plan: PlanSchema,
    limits: LimitsSchema.optional(),
    expiresAt: isoDate.optional(),
    ownerId: OwnerIdSchema.optional(),
    meta: MetaSchema.optional(),
    region: RegionSchema.optional().openapi({
      description:
        "Where to create the key's quota object (a Durable Object location hint), if you know where the key's consumer runs; without it, near the key's first request",
    }),
  })
  .openapi("CreateKey", ENTERPRISE_LIMITS_RULE as object);

const updatableKeyFields = {
  name: DisplayNameSchema.optional(),
  plan: PlanSchema.optional(),
  limits: LimitsSchema.optional(),
  enabled: z
    .boolean({ error: "must be true or false" })
    .optional()
    .openapi({ description: "false refuses the key at once (401); true lets it in again" }),
  expiresAt: isoDate
    .nullable()
    .optional()
    .openapi({ description: "When the key stops working; null removes the expiry" }),
  ownerId: OwnerIdSchema.nullable().optional(),
  meta: MetaSchema.nullable().optional(),
  region: RegionSchema.nullable().optional().openapi({
    description:
      "Where to create the key's quota object; null: near its first request. Applies only while the key has never been used: an object, once created, stays where it is",
  }),
};

/** The fields a PATCH may change, as the operator documents and errors name them. */
export const UPDATABLE_KEY_FIELDS = Object.keys(updatableKeyFields).join(", ");

export const UpdateKeySchema = z
  .strictObject(updatableKeyFields)
  .refine((b) => Object.keys(b).length > 0, `give at least one of: ${UPDATABLE_KEY_FIELDS}`)
  // A plan change to a table plan cannot come with limits; a change to enterprise needs limits
  // unless the key is enterprise already, which the body alone cannot tell (the handler can).
  .openapi("UpdateKey", {
    minProperties: 1,
    not: {
      properties: { plan: { enum: TABLE_PLANS }, limits: LIMITS_REF },
      required: ["plan", "limits"],
    },
  } as object);

export const RollKeySchema = z
  .strictObject({
    gracePeriodSeconds: z
      .number({ error: "must be an integer number of seconds" })
      .int("must be an integer number of seconds")
      .min(0, "must be at least 0")
      .max(604_800, "must be at most 604800 (7 days)")
      .default(86_400)
      .openapi({
        description: "How long the old secret keeps working (default 86400, one day)",
      }),
  })
  .openapi("RollKey");

export const KeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z
      .string()
      .openapi({ description: "The first characters of the key, for recognising it" }),
    plan: PlanSchema,
    limits: LimitsSchema,
    status: z.enum(KEY_STATE_NAMES),
    createdAt: z.string(),
    updatedAt: z.string(),
    revokedAt: z.string().nullable(),
    expiresAt: z.string().nullable(),
    disabledAt: z.string().nullable(),
    ownerId: z.string().nullable(),
    meta: z
      .record(z.string(), z.json())
      .nullable()
      .openapi({ type: ["object", "null"], additionalProperties: true }),
    region: RegionSchema.nullable().openapi({
      description:
        "Where the key's quota object is created, at its first request; null: near that request",
    }),
    rolledAt: z.string().nullable().openapi({ description: "When the secret was last rolled" }),
    previousSecretExpiresAt: z.string().nullable().openapi({
      description: "Until when the secret replaced by the last roll keeps working",
    }),
  })
  .openapi("Key");

export const CreatedKeySchema = KeySchema.extend({
  key: z.string().openapi({ description: "The secret API key. Shown once, never stored." }),
}).openapi("CreatedKey");

const UsageWindow = z.object({
  count: z.number().int(),
  limit: z.number().int().nullable(),
  resetAt: z.string(),
});

export const KeyDetailSchema = KeySchema.extend({
  usage: z
    .object({ minute: UsageWindow, day: UsageWindow, bannedUntil: z.string().nullable() })
    .nullable()
    .openapi({
      description: "Current usage from the key's quota object; null if it could not be reached",
    }),
}).openapi("KeyDetail");

export const ListedKeySchema = KeySchema.extend({
  activity: z
    .object({
      lastUsedDay: z
        .string()
        .nullable()
        .openapi({ format: "date", description: "The last UTC day with any request; null: never" }),
      today: z
        .object({ used: z.number().int(), limit: z.number().int() })
        .openapi({ description: "Requests counted today against the day quota" }),
      bannedUntil: z
        .string()
        .nullable()
        .openapi({ description: "When the key's automatic ban ends; null: not banned" }),
    })
    .nullable()
    .openapi({
      description: "Read live from the key's quota object; null if it could not be reached",
    }),
}).openapi("ListedKey");

export const KeyPageSchema = z
  .object({ data: z.array(ListedKeySchema), nextCursor: z.string().nullable() })
  .openapi("KeyPage");

// A secret starts with its environment's pet_live_ or pet_test_; the prefix shown for it (in the
// key list, and what a search matches) adds the secret's first SHOWN_SECRET_CHARACTERS. Written
// once here for the key format and the search.
export const SECRET_START = /^pet_(live|test)_/;
export const SHOWN_SECRET_CHARACTERS = 4;
export const SHOWN_PREFIX_LENGTH = "pet_test_".length + SHOWN_SECRET_CHARACTERS;

export const ListKeysQuerySchema = z.strictObject({
  limit: pageLimit("Maximum number of keys returned"),
  plan: z
    .enum(PLANS, oneOfError(PLANS))
    .optional()
    .openapi({ description: "Only keys of this plan" }),
  state: z.enum(KEY_LIST_STATES, oneOfError(KEY_LIST_STATES)).optional().openapi({
    description:
      "Only keys in this state; banned: an automatic ban is on (for keys neither revoked nor disabled)",
  }),
  ownerId: nameFilter().optional().openapi({ description: "Only keys of this owner" }),
  q: nameFilter()
    .refine(
      (q) => !SECRET_START.test(q) || q.length <= SHOWN_PREFIX_LENGTH,
      `must not hold more of a secret than its shown prefix (its first ${SHOWN_PREFIX_LENGTH} characters, pet_test_ and ${SHOWN_SECRET_CHARACTERS}): only those are matched, and the rest would be kept in request logs with the URL`,
    )
    .optional()
    .openapi({
      description: `Only keys whose name starts with this (case-sensitive); one that starts like a secret (pet_live_…, pet_test_…) also finds the keys whose secret's shown prefix starts with it, and must be at most that prefix (${SHOWN_PREFIX_LENGTH} characters: a secret is never sent in a URL)`,
    }),
  cursor: adminPageCursor,
});

// A key's id: `key_` and 20 base62 characters (made by auth/key-format.ts). Written once here for
// the id, the API key that names it, and the admin API's validation.
export const KEY_ID_PREFIX = "key_";
export const KEY_ID_LENGTH = 20;
/** A key id without its `key_`, as a pattern. */
export const KEY_ID_PART = `[0-9A-Za-z]{${KEY_ID_LENGTH}}`;
export const KEY_ID_PATTERN = new RegExp(`^${KEY_ID_PREFIX}${KEY_ID_PART}$`);

/** A key's id as the service makes them: key_ and 20 letters or digits. */
export const keyIdString = () => z.string().regex(KEY_ID_PATTERN, "must be a key id (key_…)");

export const KeyIdParamSchema = z.object({
  id: keyIdString().openapi({
    param: { name: "id", in: "path" },
    description: "The key's id: key_ and 20 letters or digits",
    example: "key_0123456789abcdefABCD",
  }),
});
