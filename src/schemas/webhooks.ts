import { z } from "@hono/zod-openapi";
import { MAX_WEBHOOK_URL_LENGTH } from "../lib/webhook-url";
import {
  adminPageCursor,
  DisplayNameSchema,
  nameFilter,
  oneOfError,
  pageLimit,
  SINGLE_LINE_TEXT_PATTERN,
  singleLineText,
} from "./common";

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
      "Where deliveries are POSTed: https: on a public host, with no credentials in it (refused: private, loopback, link-local and other special-purpose addresses that are not globally reachable, localhost, special-use names such as .local, .internal, .alt or .arpa, and invalid Punycode)",
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

// One line of text, as the console and the CLI's table show it: held to the rules of names
// (singleLineText), but it may be empty and is kept as sent, untrimmed.
const DescriptionSchema = singleLineText(
  z.string({ error: "must be a string" }).max(500, "must be at most 500 characters"),
).openapi({
  type: "string",
  maxLength: 500,
  pattern: SINGLE_LINE_TEXT_PATTERN,
  description: "Your own note about the endpoint: one line of text, as a name (may be empty)",
});

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
  ownerId: nameFilter().optional().openapi({ description: "Only the endpoints of this owner" }),
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

/** Where a delivery stands, as the delivery log shows it. */
export const DELIVERY_STATUSES = [
  "pending",
  "retrying",
  "delivered",
  "failed",
  "skipped",
  "dead",
] as const;

export const WebhookDeliverySchema = z
  .object({
    id: z.string().openapi({ example: "whd_0123456789abcdefABCD" }),
    endpointId: z.string(),
    eventId: z.string().openapi({
      description: "The event's id: the webhook-id header, the same on every attempt",
      example: "evt_Fq3b0cQ2N8xkT1mZ9aPwLs",
    }),
    eventType: z.string(),
    keyId: z.string().nullable(),
    status: z.enum(DELIVERY_STATUSES).openapi({
      description:
        "pending: waiting for an attempt; retrying: an attempt failed and another is scheduled (nextAttemptAt); delivered: a 2xx; failed: the receiver answered 410, or the last attempt failed (dead follows); skipped: the endpoint was disabled; dead: every attempt failed and the message is in the dead-letter queue (final until send again)",
    }),
    attempts: z.number().int().openapi({ description: "Attempts made so far" }),
    responseStatus: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "The last attempt's HTTP status; null: no answer" }),
    latencyMs: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "How long the last attempt took, in milliseconds" }),
    lastError: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
    deliveredAt: z.string().nullable(),
    nextAttemptAt: z.string().nullable(),
    payload: z
      .record(z.string(), z.unknown())
      .openapi({ description: "The body sent (the same on every attempt)" }),
  })
  .openapi("WebhookDelivery");

export const WebhookDeliveryPageSchema = z
  .object({ data: z.array(WebhookDeliverySchema), nextCursor: z.string().nullable() })
  .openapi("WebhookDeliveryPage");

export const ListWebhookDeliveriesQuerySchema = z.strictObject({
  limit: pageLimit("Maximum number of deliveries returned"),
  status: z
    .enum(DELIVERY_STATUSES, oneOfError(DELIVERY_STATUSES))
    .optional()
    .openapi({ description: "Only deliveries in this state" }),
  cursor: adminPageCursor,
});

export const WebhookDeliveryParamsSchema = WebhookEndpointIdParamSchema.extend({
  deliveryId: z
    .string()
    .regex(WEBHOOK_DELIVERY_ID_PATTERN, "must be a webhook delivery id (whd_…)")
    .openapi({
      param: { name: "deliveryId", in: "path" },
      description: "The delivery's id: whd_ and 20 letters or digits",
      example: "whd_0123456789abcdefABCD",
    }),
});
