import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { MAX_WEBHOOK_URL_LENGTH } from "../lib/webhook-url";
import {
  adminPageCursor,
  DisplayNameSchema,
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
  ownerId: z
    .string()
    .max(200, "must be at most 200 characters")
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

// ------------------------------------------------------------------ the events' payloads

const WebhookKeySchema = z
  .object({
    id: z.string().openapi({ example: "key_0123456789abcdefABCD" }),
    name: z.string(),
    ownerId: z.string().nullable(),
    plan: z.string().openapi({ example: "enterprise" }),
  })
  .openapi("WebhookEventKey", {
    description: "The key the event is about, as D1 has it when the event is fanned out",
  });

const iso = (description: string) => z.string().openapi({ format: "date-time", description });

const DayQuotaDataSchema = z.object({
  key: WebhookKeySchema,
  window: z.literal("day"),
  limit: z.number().int().openapi({ description: "The key's day quota" }),
  used: z.number().int().openapi({ description: "Requests counted today when the event happened" }),
  remaining: z.number().int(),
  threshold: z
    .number()
    .int()
    .openapi({ description: "The count that produced the event: 80 % of the quota, or all of it" }),
  resetAt: iso("When the UTC day ends and the count starts again"),
});

/** Each event: its type, when it is sent, and its `data`. */
const EVENT_PAYLOADS = [
  {
    type: "quota.day.warning",
    summary: "A key used 80 % of its day quota",
    description:
      "Sent once per key and UTC day, when the key's count reaches 80 % of its day quota (rounded up).",
    data: DayQuotaDataSchema,
  },
  {
    type: "quota.day.exhausted",
    summary: "A key used all of its day quota",
    description:
      "Sent once per key and UTC day, when the key's count reaches its day quota: its next requests that day get 429 quota_exceeded.",
    data: DayQuotaDataSchema,
  },
  {
    type: "key.banned",
    summary: "A key was banned",
    description:
      "Sent once per ban, when the key is banned for hammering while throttled (its requests get 429 key_banned until bannedUntil).",
    data: z.object({
      key: WebhookKeySchema,
      window: z.literal("minute"),
      limit: z.number().int().openapi({ description: "The key's per-minute limit" }),
      bannedUntil: iso("When the ban ends"),
      resetAt: iso("When the ban ends (as bannedUntil)"),
    }),
  },
  {
    type: "key.unbanned",
    summary: "A key's ban ended",
    description:
      "Sent once per ban, when it ends: when it runs out (unbannedAt = bannedUntil), or when an operator lifts it before.",
    data: z.object({
      key: WebhookKeySchema,
      bannedUntil: iso("When the ban ends, or would have ended"),
      unbannedAt: iso("When it ended: bannedUntil, or when an operator lifted it"),
    }),
  },
  {
    type: "key.revoked",
    summary: "A key was revoked",
    description: "Sent once, when the key is revoked (final: its requests get 401).",
    data: z.object({ key: WebhookKeySchema, revokedAt: iso("When the key was revoked") }),
  },
  {
    type: "key.rolled",
    summary: "A key's secret was rolled",
    description: "Sent once per roll of the key's secret.",
    data: z.object({
      key: WebhookKeySchema,
      rolledAt: iso("When the secret was rolled"),
      previousSecretExpiresAt: iso("Until when the old secret keeps working"),
    }),
  },
  {
    type: "key.expiring",
    summary: "A key expires within 7 days",
    description:
      "Sent once per expiry date, by an hourly scan, when the key expires within 7 days (a new expiresAt gets its own).",
    data: z.object({
      key: WebhookKeySchema,
      expiresAt: iso("When the key stops working"),
      resetAt: iso("When the key stops working (as expiresAt)"),
    }),
  },
  {
    type: WEBHOOK_TEST_EVENT,
    summary: "A test event",
    description:
      "Sent by send test event (POST /admin/v1/webhooks/{id}/test), whatever the endpoint subscribes to.",
    data: z.object({
      endpointId: z.string(),
      requestedBy: z.string().openapi({ description: "The admin token's name" }),
    }),
  },
] as const;

/** The Standard Webhooks headers every delivery carries. */
const DeliveryHeadersSchema = z.object({
  "webhook-id": z.string().openapi({
    description:
      "The event's id: the same on every attempt and every send again; deduplicate by it",
    example: "evt_Fq3b0cQ2N8xkT1mZ9aPwLs",
  }),
  "webhook-timestamp": z
    .string()
    .openapi({ description: "The attempt's time, in Unix seconds", example: "1781100131" }),
  "webhook-signature": z.string().openapi({
    description:
      "v1, and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the endpoint's secret (the bytes after whsec_); two, space-separated, during a secret roll's grace period",
    example: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
  }),
});

/**
 * Registers every event's delivery as an OpenAPI 3.1 webhook of the operator document: a POST
 * of the event's JSON body, with the Standard Webhooks headers, to the endpoint's URL.
 */
export function registerWebhookEvents(registry: OpenAPIHono["openAPIRegistry"]): void {
  for (const event of EVENT_PAYLOADS) {
    const name = event.type
      .split(/[._]/)
      .map((w) => w[0]!.toUpperCase() + w.slice(1))
      .join("");
    const body = z
      .object({
        id: z.string().openapi({ description: "The event's id, as webhook-id" }),
        type: z.literal(event.type),
        timestamp: iso("When the event happened (order events by it)"),
        data: event.data,
      })
      .openapi(`${name}Event`);
    registry.registerWebhook({
      method: "post",
      path: event.type,
      operationId: `${name.charAt(0).toLowerCase()}${name.slice(1)}Webhook`,
      tags: ["Webhooks"],
      summary: event.summary,
      description: `${event.description} POSTed to every enabled endpoint subscribed to ${event.type}${event.type === WEBHOOK_TEST_EVENT ? "" : " for the key's owner or for every owner"}, signed as Standard Webhooks specifies; retried on failure (docs/webhooks.md).`,
      security: [],
      request: {
        headers: DeliveryHeadersSchema,
        body: { required: true, content: { "application/json": { schema: body } } },
      },
      responses: {
        200: { description: "Any 2xx acknowledges the delivery" },
        410: { description: "Gone: the endpoint is disabled, and nothing more is sent to it" },
      },
    });
  }
}
