import { z } from "@hono/zod-openapi";
import { DisplayNameSchema, MAX_ID, pageLimit, positiveIdString } from "./common";

const PET_STATUSES = ["available", "pending", "sold"] as const;

const PetStatusSchema = z
  .enum(PET_STATUSES, { error: "must be one of: available, pending, sold (case-sensitive)" })
  .openapi("PetStatus", { description: "Availability status" });

export const NewPetSchema = z
  .strictObject({
    name: DisplayNameSchema.openapi({
      description: "The animal's name (trimmed)",
      example: "Rex",
    }),
    categoryId: z
      .number({ error: (i) => (i.input === undefined ? "is required" : "must be an integer") })
      // Not .int(): it also refuses unsafe integers, which max() below explains better.
      .refine(Number.isInteger, "must be an integer")
      .min(1, "must be at least 1")
      .max(
        MAX_ID,
        `must be at most ${MAX_ID} (2^53−1); larger int64 values cannot be represented exactly and are refused rather than rounded`,
      )
      .openapi({
        type: "integer",
        format: "int64",
        minimum: 1,
        maximum: MAX_ID,
        description: "Identifier of the category the animal belongs to",
        example: 1,
      }),
    status: PetStatusSchema.default("available").openapi({
      description: "Availability status; `available` when omitted",
    }),
  })
  .openapi("NewPet");

export const PetSchema = z
  .object({
    id: z
      .number()
      .int()
      .min(1)
      .max(MAX_ID)
      .openapi({ format: "int64", description: "Assigned by the service", example: 1 }),
    name: z.string().openapi({ example: "Rex" }),
    categoryId: z.number().int().openapi({ format: "int64", example: 1 }),
    status: PetStatusSchema,
  })
  .openapi("Pet");

export const PetsSchema = z.array(PetSchema).openapi("Pets");

export const ListPetsQuerySchema = z.object({
  limit: pageLimit("Maximum number of animals returned"),
  status: PetStatusSchema.optional().openapi({ description: "Filters by availability status" }),
  cursor: z.string().optional().openapi({
    description: 'Opaque; copy it from the `Link: <…>; rel="next"` header of the previous page',
  }),
});

/**
 * The Idempotency-Key header's rules as one JSON Schema `pattern`: 1–255 printable ASCII
 * characters, either quoted (`"…"`, the draft's structured-field form, with no quote inside) or
 * bare, without a comma and not of the quoted form. A property test holds it to the schema below.
 */
export const IDEMPOTENCY_KEY_PATTERN = '^(?:"[ !#-~]{1,255}"|(?!"[\\s\\S]*"$)[ -+\\--~]{1,255})$';

export const CreatePetHeadersSchema = z.object({
  "idempotency-key": z
    .string()
    // The runtime joins repeated headers with ", ": a comma in a bare value, or a quote inside a
    // quoted one, means more than one key was sent, and joining them would make a third key.
    .refine(
      (v) => (/^".*"$/s.test(v) ? !v.slice(1, -1).includes('"') : !v.includes(",")),
      "send exactly one Idempotency-Key header (a bare key cannot contain a comma)",
    )
    // Accept the draft's structured-field form ("…") as well as a bare value.
    .transform((v) => (v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v))
    .pipe(z.string().regex(/^[\x20-\x7E]{1,255}$/, "must be 1–255 printable ASCII characters"))
    .optional()
    .openapi({
      description:
        "Makes retries safe: the same key and body within 24 h return the first answer (Idempotent-Replayed: true). 1–255 printable ASCII characters; exactly one header; a bare key contains no comma (quote it to use one)",
      pattern: IDEMPOTENCY_KEY_PATTERN,
    }),
});

export const PetIdParamSchema = z.object({
  petId: positiveIdString("petId", "The animal's id (an integer from 1 to 2^53−1)"),
});

export type NewPet = z.infer<typeof NewPetSchema>;
export type Pet = z.infer<typeof PetSchema>;
export type PetStatus = z.infer<typeof PetStatusSchema>;
