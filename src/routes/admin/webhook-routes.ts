import { createRoute, OpenAPIHono, type z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AuditAction, FieldChanges } from "../../db/audit";
import {
  changeEndpoint,
  type DeliveryRecord,
  deleteEndpoint,
  getDelivery,
  getEndpoint,
  insertDelivery,
  insertEndpoint,
  listDeliveries,
  listEndpoints,
  resetDelivery,
  rollEndpointSecret,
  type WebhookEndpointRecord,
  type WebhookEndpointSettings,
} from "../../db/webhooks";
import { clock, isoTime } from "../../lib/clock";
import { type Config, webhookSecretBoxOrThrow } from "../../lib/config";
import { randomBase62 } from "../../lib/crypto";
import { ApiError, unavailable } from "../../lib/errors";
import { sealSecret } from "../../lib/sealed-secret";
import { newChain, queueDeliveriesOrThrow } from "../../lib/webhook-events";
import { newWebhookSecret, webhookSecretKey } from "../../lib/webhook-signature";
import { webhookUrlProblem } from "../../lib/webhook-url";
import { jsonBody, noBody } from "../../middleware/json-body";
import { validationHook } from "../../middleware/validation-hook";
import { adminErrorResponses, json, NoQuerySchema } from "../../schemas/common";
import {
  CreatedWebhookEndpointSchema,
  CreateWebhookEndpointSchema,
  ListWebhookDeliveriesQuerySchema,
  ListWebhookEndpointsQuerySchema,
  RollWebhookSecretSchema,
  UPDATABLE_WEBHOOK_FIELDS,
  UpdateWebhookEndpointSchema,
  WEBHOOK_TEST_EVENT,
  WebhookDeliveryPageSchema,
  WebhookDeliveryParamsSchema,
  WebhookDeliverySchema,
  WebhookEndpointIdParamSchema,
  WebhookEndpointPageSchema,
  WebhookEndpointSchema,
} from "../../schemas/webhooks";
import { type AdminEnv, auditOf, cursorSecrets, security } from "./admin-env";
import { decodeKeyCursorOrThrow, keyCursorValues, pageOf } from "./key-views";
import { writeWhileUnchangedOrThrow } from "./write-while-unchanged";

const byId = { params: WebhookEndpointIdParamSchema, query: NoQuerySchema };

/** The reason an operator's `enabled: false` records. */
const DISABLED_BY_OPERATOR = "disabled by an operator";

/** An endpoint as the operator API shows it: never its secrets. */
export function endpointView(e: WebhookEndpointRecord): z.infer<typeof WebhookEndpointSchema> {
  return {
    id: e.id,
    url: e.url,
    eventTypes: e.eventTypes,
    ownerId: e.ownerId,
    description: e.description,
    enabled: e.disabledAt === null,
    disabledAt: isoTime(e.disabledAt),
    disabledReason: e.disabledReason,
    secretRolledAt: isoTime(e.secretRolledAt),
    previousSecretExpiresAt: isoTime(e.previousSecretExpiresAt),
    createdAt: isoTime(e.createdAt),
    updatedAt: isoTime(e.updatedAt),
  };
}

export function endpointFoundOrThrow(
  record: WebhookEndpointRecord | null,
  id: string,
): WebhookEndpointRecord {
  if (!record) throw new ApiError("not_found", `No webhook endpoint with id ${id}.`);
  return record;
}

/** A delivery as the delivery log shows it. */
export function deliveryView(d: DeliveryRecord): z.infer<typeof WebhookDeliverySchema> {
  return {
    id: d.id,
    endpointId: d.endpointId,
    eventId: d.eventId,
    eventType: d.eventType,
    keyId: d.keyId,
    status: d.status,
    attempts: d.attempts,
    responseStatus: d.responseStatus,
    latencyMs: d.latencyMs,
    lastError: d.lastError,
    createdAt: isoTime(d.createdAt),
    updatedAt: isoTime(d.updatedAt),
    deliveredAt: isoTime(d.deliveredAt),
    nextAttemptAt: isoTime(d.nextAttemptAt),
    payload: JSON.parse(d.payload) as Record<string, unknown>,
  };
}

/**
 * Queues an attempt of `deliveryId` in chain `chain`; 503 when the queue refuses it (nothing is
 * lost: repeat it).
 */
async function queueAttemptOrThrow(
  c: Context<AdminEnv>,
  deliveryId: string,
  chain: string,
): Promise<void> {
  try {
    await queueDeliveriesOrThrow(c.env.WEBHOOK_QUEUE, [{ deliveryId, chain }]);
  } catch {
    throw unavailable("The webhook queue did not take the delivery; repeat the request.");
  }
}

/** The URL if this deployment may deliver to it; else 400 naming the rule it breaks. */
function urlOrThrow(url: string, config: Config): string {
  const problem = webhookUrlProblem(url, {
    localReceivers: config.WEBHOOK_LOCAL_RECEIVERS === "on",
  });
  if (problem) throw new ApiError("invalid_request", `url: ${problem}.`);
  return url;
}

/** The operator's own secret if it follows the specification's form, else 400; or a new one. */
function secretOrThrow(given: string | undefined): string {
  if (given === undefined) return newWebhookSecret();
  const key = webhookSecretKey(given);
  if (typeof key === "string") throw new ApiError("invalid_request", `secret: ${key}.`);
  return given;
}

/** What changed between two settings of an endpoint, as the audit trail records it. */
function endpointChanges(
  before: WebhookEndpointSettings | null,
  after: WebhookEndpointSettings,
): FieldChanges {
  const shown = (s: WebhookEndpointSettings | null) => ({
    url: s?.url ?? null,
    eventTypes: s?.eventTypes ?? null,
    ownerId: s?.ownerId ?? null,
    description: s?.description ?? null,
    disabledAt: isoTime(s?.disabledAt ?? null),
    disabledReason: s?.disabledReason ?? null,
  });
  const [b, a] = [shown(before), shown(after)];
  const changes: FieldChanges = {};
  for (const field of Object.keys(a) as (keyof typeof a)[])
    if (JSON.stringify(b[field]) !== JSON.stringify(a[field]))
      changes[field] = { before: b[field], after: a[field] };
  return changes;
}

/**
 * Reads the endpoint and writes `write`'s change on condition it is unchanged, decided again on
 * the fresh endpoint when another write got there first (writeWhileUnchangedOrThrow); 404 for an
 * unknown endpoint, 503 if it keeps changing.
 */
function writeEndpointOrThrow(
  c: Context<AdminEnv>,
  id: string,
  write: (
    current: WebhookEndpointRecord,
    now: number,
  ) => Promise<WebhookEndpointRecord | null> | WebhookEndpointRecord,
): Promise<WebhookEndpointRecord> {
  return writeWhileUnchangedOrThrow(
    async () => endpointFoundOrThrow(await getEndpoint(c.env.DB, id), id),
    write,
    {
      now: () => clock.now(),
      keptChangingMessage:
        "The webhook endpoint kept changing while this request tried to change it; repeat it.",
    },
  );
}

export const webhookEndpointsApi = new OpenAPIHono<AdminEnv>({ defaultHook: validationHook })
  .openapi(
    createRoute({
      method: "post",
      path: "/webhooks",
      operationId: "createWebhookEndpoint",
      tags: ["Webhooks"],
      summary: "Register a webhook endpoint",
      description:
        "Registers a URL that receives the events it names, for the keys of one owner (`ownerId`) or of every owner (no `ownerId`). The URL must be https: on a public host with no credentials in it. Returns the endpoint with its signing secret (`whsec_…`), shown only this once; deliveries carry `webhook-id`, `webhook-timestamp` and `webhook-signature` as the Standard Webhooks specification says. Recorded in the audit trail; Location points at the new endpoint.",
      security,
      middleware: jsonBody,
      request: {
        query: NoQuerySchema,
        body: { required: true, content: json(CreateWebhookEndpointSchema) },
      },
      responses: {
        201: {
          description: "The new endpoint, with its signing secret (shown once)",
          headers: {
            Location: {
              description: "The new endpoint's URL: /admin/v1/webhooks/{id}",
              schema: { type: "string" as const },
            },
          },
          content: json(CreatedWebhookEndpointSchema),
        },
        ...adminErrorResponses(400, 401, 403, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const now = clock.now();
      const id = `whe_${randomBase62(20)}`;
      const url = urlOrThrow(body.url, c.var.config);
      const secret = secretOrThrow(body.secret);
      const box = await webhookSecretBoxOrThrow(c.var.config);
      const endpoint: WebhookEndpointRecord = {
        id,
        ownerId: body.ownerId ?? null,
        url,
        eventTypes: body.eventTypes,
        description: body.description ?? null,
        secret: await sealSecret(box, id, secret),
        previousSecret: null,
        previousSecretExpiresAt: null,
        secretRolledAt: null,
        disabledAt: null,
        disabledReason: null,
        createdAt: now,
        updatedAt: now,
        version: 1,
      };
      await insertEndpoint(
        c.env.DB,
        endpoint,
        auditOf(c, "webhook_create", endpoint.id, endpointChanges(null, endpoint)),
      );
      c.header("Location", `/admin/v1/webhooks/${endpoint.id}`);
      return c.json({ ...endpointView(endpoint), secret }, 201);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/webhooks",
      operationId: "listWebhookEndpoints",
      tags: ["Webhooks"],
      summary: "List webhook endpoints",
      description:
        "Endpoints in creation order, a page at a time (`cursor` is the previous page's `nextCursor`), optionally only those of one owner. Secrets are never returned.",
      security,
      request: { query: ListWebhookEndpointsQuerySchema },
      responses: {
        200: {
          description: "Endpoints in creation order",
          content: json(WebhookEndpointPageSchema),
        },
        ...adminErrorResponses(400, 401, 429, 503),
      },
    }),
    async (c) => {
      const { limit, cursor, ownerId } = c.req.valid("query");
      const rows = await listEndpoints(
        c.env.DB,
        limit + 1,
        cursor ? await decodeKeyCursorOrThrow(cursorSecrets(c), "webhooks", cursor) : undefined,
        ownerId,
      );
      const { page, nextCursor } = await pageOf(rows, limit, {
        secrets: cursorSecrets(c),
        list: "webhooks",
        valuesOf: keyCursorValues,
      });
      return c.json({ data: page.map(endpointView), nextCursor }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/webhooks/{id}",
      operationId: "getWebhookEndpoint",
      tags: ["Webhooks"],
      summary: "Get a webhook endpoint",
      description: "The endpoint, without its secret. 404 if no endpoint has this id.",
      security,
      request: byId,
      responses: {
        200: { description: "The endpoint", content: json(WebhookEndpointSchema) },
        ...adminErrorResponses(400, 401, 404, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      return c.json(endpointView(endpointFoundOrThrow(await getEndpoint(c.env.DB, id), id)), 200);
    },
  )
  .openapi(
    createRoute({
      method: "patch",
      path: "/webhooks/{id}",
      operationId: "updateWebhookEndpoint",
      tags: ["Webhooks"],
      summary: "Change a webhook endpoint",
      description: `Changes any of ${UPDATABLE_WEBHOOK_FIELDS}; fields not given keep their value. \`enabled: false\` stops deliveries to it, \`enabled: true\` resumes them (also after the service disabled it because its receiver answered Gone). Recorded in the audit trail as webhook_update; a PATCH that changes nothing writes no entry. 404 if no endpoint has this id.`,
      security,
      middleware: jsonBody,
      request: { ...byId, body: { required: true, content: json(UpdateWebhookEndpointSchema) } },
      responses: {
        200: { description: "The endpoint as changed", content: json(WebhookEndpointSchema) },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const body = c.req.valid("json");
      const url = body.url === undefined ? undefined : urlOrThrow(body.url, c.var.config);
      const updated = await writeEndpointOrThrow(c, id, (current, now) => {
        const disabledAt =
          body.enabled === undefined
            ? current.disabledAt
            : body.enabled
              ? null
              : (current.disabledAt ?? now);
        const next: WebhookEndpointSettings = {
          ownerId: body.ownerId === undefined ? current.ownerId : body.ownerId,
          url: url ?? current.url,
          eventTypes: body.eventTypes ?? current.eventTypes,
          description: body.description === undefined ? current.description : body.description,
          disabledAt,
          disabledReason:
            disabledAt === null
              ? null
              : current.disabledAt === null
                ? DISABLED_BY_OPERATOR
                : current.disabledReason,
        };
        const changes = endpointChanges(current, next);
        if (Object.keys(changes).length === 0) return current;
        const action: AuditAction = "webhook_update";
        return changeEndpoint(
          c.env.DB,
          id,
          current.version,
          next,
          now,
          auditOf(c, action, id, changes),
        );
      });
      return c.json(endpointView(updated), 200);
    },
  )
  .openapi(
    createRoute({
      method: "delete",
      path: "/webhooks/{id}",
      operationId: "deleteWebhookEndpoint",
      tags: ["Webhooks"],
      summary: "Delete a webhook endpoint",
      description:
        "Deletes the endpoint and its delivery log; deliveries still queued for it are dropped. Recorded in the audit trail. 404 if no endpoint has this id. Takes no body, or `{}`: one with fields is a 400 naming them, one that is not JSON a 415.",
      middleware: noBody,
      security,
      request: byId,
      responses: {
        204: { description: "Deleted" },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const current = endpointFoundOrThrow(await getEndpoint(c.env.DB, id), id);
      const deleted = await deleteEndpoint(
        c.env.DB,
        id,
        auditOf(c, "webhook_delete", id, { url: { before: current.url, after: null } }),
      );
      if (!deleted) throw new ApiError("not_found", `No webhook endpoint with id ${id}.`);
      return c.body(null, 204);
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/webhooks/{id}/roll-secret",
      operationId: "rollWebhookSecret",
      tags: ["Webhooks"],
      summary: "Roll a webhook endpoint's signing secret",
      description:
        "Replaces the signing secret (with `secret` if given, else a new one) and returns the endpoint with it, shown only this once. For `gracePeriodSeconds` (default one day, at most 7 days; 0: none) every delivery carries two signatures, one per secret, so the receiver can switch secrets at any moment in between. Recorded in the audit trail (never the secrets). 404 if no endpoint has this id.",
      security,
      middleware: jsonBody,
      request: { ...byId, body: { required: true, content: json(RollWebhookSecretSchema) } },
      responses: {
        201: {
          description: "The endpoint with its new signing secret (shown once)",
          content: json(CreatedWebhookEndpointSchema),
        },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const body = c.req.valid("json");
      const secret = secretOrThrow(body.secret);
      const sealed = await sealSecret(await webhookSecretBoxOrThrow(c.var.config), id, secret);
      const rolled = await writeEndpointOrThrow(c, id, (current, now) => {
        const previousExpiresAt = now + body.gracePeriodSeconds * 1000;
        return rollEndpointSecret(
          c.env.DB,
          id,
          current.version,
          { secret: sealed, now, previousExpiresAt },
          auditOf(c, "webhook_roll_secret", id, {
            previousSecretExpiresAt: {
              before: isoTime(current.previousSecretExpiresAt),
              after: isoTime(previousExpiresAt),
            },
          }),
        );
      });
      return c.json({ ...endpointView(rolled), secret }, 201);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/webhooks/{id}/deliveries",
      operationId: "listWebhookDeliveries",
      tags: ["Webhooks"],
      summary: "An endpoint's delivery log",
      description:
        "The endpoint's deliveries, newest first, a page at a time, optionally only those in one state: each with its event, status, attempts, the last attempt's response status, latency and error, and the body sent. 404 if no endpoint has this id.",
      security,
      request: { params: WebhookEndpointIdParamSchema, query: ListWebhookDeliveriesQuerySchema },
      responses: {
        200: {
          description: "Deliveries, newest first",
          content: json(WebhookDeliveryPageSchema),
        },
        ...adminErrorResponses(400, 401, 404, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const { limit, cursor, status } = c.req.valid("query");
      endpointFoundOrThrow(await getEndpoint(c.env.DB, id), id);
      const rows = await listDeliveries(
        c.env.DB,
        id,
        limit + 1,
        cursor ? await decodeKeyCursorOrThrow(cursorSecrets(c), "deliveries", cursor) : undefined,
        status,
      );
      const { page, nextCursor } = await pageOf(rows, limit, {
        secrets: cursorSecrets(c),
        list: "deliveries",
        valuesOf: keyCursorValues,
      });
      return c.json({ data: page.map(deliveryView), nextCursor }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/webhooks/{id}/deliveries/{deliveryId}/resend",
      operationId: "resendWebhookDelivery",
      tags: ["Webhooks"],
      summary: "Send a delivery again",
      description:
        "Queues a new attempt of the delivery, with the same event id and body (so a receiver that has it already deduplicates it), signed anew; its retries start over. A delivery to a disabled endpoint is skipped (enable the endpoint first). Answers 202 with the delivery as it stands. 404 if no such endpoint or delivery; 503 if the queue did not take it. Takes no body, or `{}`: one with fields is a 400 naming them, one that is not JSON a 415.",
      middleware: noBody,
      security,
      request: { params: WebhookDeliveryParamsSchema, query: NoQuerySchema },
      responses: {
        202: { description: "The delivery, queued again", content: json(WebhookDeliverySchema) },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id, deliveryId } = c.req.valid("param");
      const found = await getDelivery(c.env.DB, id, deliveryId);
      if (!found)
        throw new ApiError("not_found", `No delivery ${deliveryId} to webhook endpoint ${id}.`);
      const now = clock.now();
      const chain = newChain();
      await resetDelivery(c.env.DB, deliveryId, now, chain);
      await queueAttemptOrThrow(c, deliveryId, chain);
      return c.json(
        deliveryView({ ...found, status: "pending", nextAttemptAt: now, updatedAt: now }),
        202,
      );
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/webhooks/{id}/test",
      operationId: "sendWebhookTestEvent",
      tags: ["Webhooks"],
      summary: "Send a test event",
      description: `Queues a \`${WEBHOOK_TEST_EVENT}\` event to the endpoint, whatever types it subscribes to, signed and retried like any other: a way to check the receiver and its signature check. Answers 202 with the delivery, which the delivery log then shows. 404 if no endpoint has this id; 503 if the queue did not take it. Takes no body, or \`{}\`: one with fields is a 400 naming them, one that is not JSON a 415.`,
      middleware: noBody,
      security,
      request: byId,
      responses: {
        202: {
          description: "The test event's delivery, queued",
          content: json(WebhookDeliverySchema),
        },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const endpoint = endpointFoundOrThrow(await getEndpoint(c.env.DB, id), id);
      const now = clock.now();
      const eventId = `evt_${randomBase62(20)}`;
      const chain = newChain();
      const delivery: DeliveryRecord = {
        id: `whd_${randomBase62(20)}`,
        endpointId: endpoint.id,
        eventId,
        eventType: WEBHOOK_TEST_EVENT,
        keyId: null,
        payload: JSON.stringify({
          id: eventId,
          type: WEBHOOK_TEST_EVENT,
          timestamp: isoTime(now),
          data: { endpointId: endpoint.id, requestedBy: c.var.adminActor },
        }),
        status: "pending",
        attempts: 0,
        responseStatus: null,
        latencyMs: null,
        lastError: null,
        createdAt: now,
        updatedAt: now,
        deliveredAt: null,
        nextAttemptAt: now,
        queuedChain: chain,
      };
      await insertDelivery(c.env.DB, delivery, now, { chain });
      await queueAttemptOrThrow(c, delivery.id, chain);
      return c.json(deliveryView(delivery), 202);
    },
  );
