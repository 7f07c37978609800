import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { WEBHOOK_TEST_EVENT } from "./webhooks";

/**
 * What the service POSTs to webhook endpoints, one payload per event type, as the operator
 * document describes it (its `webhooks`). Only the document's generator reads these, so they
 * live apart from the endpoints' schemas: the Worker's bundle does not carry them (the documents
 * are generated at build time: routes/openapi-served.ts).
 */
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
