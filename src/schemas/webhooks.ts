import { z } from "@hono/zod-openapi";
import { MAX_WEBHOOK_URL_LENGTH } from "../lib/webhook-url";
import { adminPageCursor, DisplayNameSchema, oneOfError, pageLimit } from "./common";

/**
 * The events an endpoint can subscribe to (what each means, and its payload: docs/webhooks.md and
 * the operator document's `webhooks`). A closed list: an unknown type is a 400, not a silent
 * subscription to nothing.
 */
export const WEBHOOK_EVENT_TYPES = [
  "quota.day.warning",
  "quota.day.exhausted",
  "key.banned",
  "key.unbanned",
  "key.revoked",
  "key.rolled",
  "key.expiring",
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The event "send test event" delivers, whatever the endpoint subscribes to. */
export const WEBHOOK_TEST_EVENT = "webhook.test";

// An endpoint's id: `whe_` and 20 base62 characters; a delivery's: `whd_` and 20.
export const WEBHOOK_ENDPOINT_ID_PATTERN = /^whe_[0-9A-Za-z]{20}$/;
export const WEBHOOK_DELIVERY_ID_PATTERN = /^whd_[0-9A-Za-z]{20}$/;

/** The longest grace period of a rolled signing secret: 7 days, as for a key's secret. */
export const MAX_WEBHOOK_SECRET_GRACE_SECONDS = 604_800;

const UrlSchema = z
  .string({ error: (i) => (i.input === undefined ? "is required" : "must be a string") })
  .max(MAX_WEBHOOK_URL_LENGTH, `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`)
  .openapi({
    format: "uri",
    maxLength: MAX_WEBHOOK_URL_LENGTH,
    description:
      "Where deliveries are POSTed: https: on a public host, with no credentials in it (private, loopback and link-local addresses, localhost and names such as .local or .internal are refused)",
    example: "https://hooks.example.com/animal-store",
  });

const EventTypesSchema = z
  .array(z.enum(WEBHOOK_EVENT_TYPES, oneOfError(WEBHOOK_EVENT_TYPES)), {
    error: "must be an array of event types",
  })
  .min(1, "must name at least one event type")
  .max(WEBHOOK_EVENT_TYPES.length, `must name at most ${WEBHOOK_EVENT_TYPES.length} event types`)
  .refine((types) => new Set(types).size === types.length, "must not name a type twice")
  .openapi({ uniqueItems: true, description: "The events sent to the endpoint" });

const OwnerSchema = DisplayNameSchema.nullable().openapi({
  description:
    "Only events about keys of this owner (a key's ownerId); null: events about every key",
});

const DescriptionSchema = z
  .string({ error: "must be a string" })
  .max(500, "must be at most 500 characters")
  .openapi({ description: "Your own note about the endpoint" });

const SecretSchema = z
  .string({ error: "must be a string" })
  .max(200, "must be at most 200 characters")
  .openapi({
    description:
      "A signing secret of your own: whsec_ and the base64 of 24 to 64 bytes. Without it the service makes one (32 random bytes).",
    example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  });

export const CreateWebhookEndpointSchema = z
  .strictObject({
    url: UrlSchema,
    eventTypes: EventTypesSchema,
    ownerId: OwnerSchema.optional(),
    description: DescriptionSchema.optional(),
    secret: SecretSchema.optional(),
  })
  .openapi("CreateWebhookEndpoint");

const updatableFields = {
  url: UrlSchema.optional(),
  eventTypes: EventTypesSchema.optional(),
  ownerId: OwnerSchema.optional(),
  description: DescriptionSchema.nullable().optional(),
  enabled: z.boolean({ error: "must be true or false" }).optional().openapi({
    description:
      "false stops deliveries to the endpoint; true resumes them (also after its receiver answered 410)",
  }),
};

export const UPDATABLE_WEBHOOK_FIELDS = Object.keys(updatableFields).join(", ");

export const UpdateWebhookEndpointSchema = z
  .strictObject(updatableFields)
  .refine((b) => Object.keys(b).length > 0, `give at least one of: ${UPDATABLE_WEBHOOK_FIELDS}`)
  .openapi("UpdateWebhookEndpoint", { minProperties: 1 } as object);

export const RollWebhookSecretSchema = z
  .strictObject({
    gracePeriodSeconds: z
      .number({ error: "must be an integer number of seconds" })
      .int("must be an integer number of seconds")
      .min(0, "must be at least 0")
      .max(
        MAX_WEBHOOK_SECRET_GRACE_SECONDS,
        `must be at most ${MAX_WEBHOOK_SECRET_GRACE_SECONDS} (7 days)`,
      )
      .default(86_400)
      .openapi({
        description:
          "How long deliveries are also signed with the old secret (default 86400, one day; 0: not at all)",
      }),
    secret: SecretSchema.optional(),
  })
  .openapi("RollWebhookSecret");

export const WebhookEndpointSchema = z
  .object({
    id: z.string().openapi({ example: "whe_0123456789abcdefABCD" }),
    url: z.string(),
    eventTypes: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
    ownerId: z.string().nullable().openapi({ description: "null: events about every key" }),
    description: z.string().nullable(),
    enabled: z.boolean(),
    disabledAt: z.string().nullable(),
    disabledReason: z.string().nullable().openapi({
      description:
        "Why deliveries stopped: disabled by an operator, or the receiver answered 410 Gone",
    }),
    secretRolledAt: z.string().nullable(),
    previousSecretExpiresAt: z.string().nullable().openapi({
      description: "Until when deliveries are also signed with the secret before the last roll",
    }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("WebhookEndpoint");

export const CreatedWebhookEndpointSchema = WebhookEndpointSchema.extend({
  secret: z.string().openapi({
    description:
      "The signing secret (whsec_…). Shown only in this answer: keep it where the receiver verifies signatures.",
  }),
}).openapi("CreatedWebhookEndpoint");

export const WebhookEndpointPageSchema = z
  .object({ data: z.array(WebhookEndpointSchema), nextCursor: z.string().nullable() })
  .openapi("WebhookEndpointPage");

export const ListWebhookEndpointsQuerySchema = z.strictObject({
  limit: pageLimit("Maximum number of endpoints returned"),
  ownerId: z
    .string()
    .max(200)
    .optional()
    .openapi({ description: "Only the endpoints of this owner" }),
  cursor: adminPageCursor,
});

export const WebhookEndpointIdParamSchema = z.object({
  id: z
    .string()
    .regex(WEBHOOK_ENDPOINT_ID_PATTERN, "must be a webhook endpoint id (whe_…)")
    .openapi({
      param: { name: "id", in: "path" },
      description: "The endpoint's id: whe_ and 20 letters or digits",
      example: "whe_0123456789abcdefABCD",
    }),
});
