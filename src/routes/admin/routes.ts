import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { forgetKey } from "../../auth/key-cache";
import { generateApiKey } from "../../auth/key-format";
import { getKey, insertKey, type KeyRecord, listKeys, revokeKey, updateKey } from "../../db/keys";
import { clock } from "../../lib/clock";
import { configOrThrow } from "../../lib/config";
import { randomBase62, sha256Hex } from "../../lib/crypto";
import { ApiError } from "../../lib/errors";
import type { BaseEnv } from "../../lib/hono-env";
import { jsonBody } from "../../middleware/json-body";
import { validationHook } from "../../middleware/validation-hook";
import { policyOf, QuotaLimiterClient } from "../../objects/quota-limiter-client";
import type { Limits, Plan } from "../../quota/plans";
import { errorResponses, json } from "../../schemas/common";
import {
  CreatedKeySchema,
  CreateKeySchema,
  KeyDetailSchema,
  KeyIdParamSchema,
  KeyPageSchema,
  KeySchema,
  ListKeysQuerySchema,
  UpdateKeySchema,
} from "../../schemas/keys";
import { decodeKeyCursorOrThrow, encodeKeyCursor, keyView, usageView } from "./key-views";

const security = [{ adminToken: [] }];
const byId = { params: KeyIdParamSchema };

/** Enterprise keys need their own limits; the other plans take the plan table's and refuse any. */
function ownLimitsOrThrow(plan: Plan, limits: Limits | undefined): Limits | null {
  if (plan === "enterprise" && !limits)
    throw new ApiError(
      "invalid_request",
      "limits: is required for the enterprise plan ({perMinute, perDay}).",
    );
  if (plan !== "enterprise" && limits)
    throw new ApiError(
      "invalid_request",
      `limits: only enterprise keys have their own limits; the ${plan} plan's come from the plan table.`,
    );
  return limits ?? null;
}

function expiryOrThrow(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const at = Date.parse(value);
  if (!(at > now)) throw new ApiError("invalid_request", "expiresAt: must be in the future.");
  return at;
}

function foundOrThrow(record: KeyRecord | null, id: string): KeyRecord {
  if (!record) throw new ApiError("not_found", `No key with id ${id}.`);
  return record;
}

/** Makes a change take effect on the key's very next request, in every isolate. */
async function pushPolicyOrThrow(env: Env, key: KeyRecord): Promise<void> {
  forgetKey(key.id);
  await new QuotaLimiterClient(env.QUOTA, key.id).configureOrThrow(policyOf(key));
}

export const adminApi = new OpenAPIHono<BaseEnv>({ defaultHook: validationHook })
  .openapi(
    createRoute({
      method: "post",
      path: "/keys",
      operationId: "createKey",
      security,
      middleware: jsonBody,
      request: { body: { required: true, content: json(CreateKeySchema) } },
      responses: {
        201: {
          description: "The new key, with its secret (shown once)",
          content: json(CreatedKeySchema),
        },
        ...errorResponses(400, 401, 413, 415, 503),
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const now = clock.now();
      const { key, displayPrefix } = generateApiKey(configOrThrow(c.env).ENVIRONMENT);
      const record = await insertKey(c.env.DB, {
        id: `key_${randomBase62(20)}`,
        name: body.name,
        hash: await sha256Hex(key),
        prefix: displayPrefix,
        plan: body.plan,
        ownLimits: ownLimitsOrThrow(body.plan, body.limits),
        expiresAt: expiryOrThrow(body.expiresAt, now),
        now,
      });
      c.header("Location", `/admin/v1/keys/${record.id}`);
      return c.json({ ...keyView(record, now), key }, 201);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/keys",
      operationId: "listKeys",
      security,
      request: { query: ListKeysQuerySchema },
      responses: {
        200: { description: "Keys in creation order", content: json(KeyPageSchema) },
        ...errorResponses(400, 401, 503),
      },
    }),
    async (c) => {
      const { limit, cursor } = c.req.valid("query");
      const keys = await listKeys(
        c.env.DB,
        limit + 1,
        cursor ? decodeKeyCursorOrThrow(cursor) : undefined,
      );
      const page = keys.slice(0, limit);
      const now = clock.now();
      return c.json(
        {
          data: page.map((k) => keyView(k, now)),
          nextCursor: keys.length > limit ? encodeKeyCursor(page[page.length - 1]!) : null,
        },
        200,
      );
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/keys/{id}",
      operationId: "getKey",
      security,
      request: byId,
      responses: {
        200: {
          description: "The key with its current usage and ban",
          content: json(KeyDetailSchema),
        },
        ...errorResponses(400, 401, 404, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const record = foundOrThrow(await getKey(c.env.DB, id), id);
      const usage = await new QuotaLimiterClient(c.env.QUOTA, id).usage(policyOf(record));
      return c.json({ ...keyView(record, clock.now()), usage: usageView(usage) }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "patch",
      path: "/keys/{id}",
      operationId: "updateKey",
      security,
      middleware: jsonBody,
      request: { ...byId, body: { required: true, content: json(UpdateKeySchema) } },
      responses: {
        200: { description: "The updated key", content: json(KeySchema) },
        ...errorResponses(400, 401, 404, 413, 415, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const body = c.req.valid("json");
      const current = foundOrThrow(await getKey(c.env.DB, id), id);
      const plan = body.plan ?? current.plan;
      // Moving to enterprise without new limits keeps none to fall back on, so limits are required then.
      const limits =
        body.limits ??
        (plan === "enterprise" && current.plan === "enterprise" ? current.limits : undefined);
      const updated = foundOrThrow(
        await updateKey(
          c.env.DB,
          id,
          { name: body.name ?? current.name, plan, ownLimits: ownLimitsOrThrow(plan, limits) },
          clock.now(),
        ),
        id,
      );
      await pushPolicyOrThrow(c.env, updated);
      return c.json(keyView(updated, clock.now()), 200);
    },
  )
  .openapi(
    createRoute({
      method: "delete",
      path: "/keys/{id}",
      operationId: "revokeKey",
      security,
      request: byId,
      responses: {
        200: {
          description: "The revoked key; refused from its next request on",
          content: json(KeySchema),
        },
        ...errorResponses(400, 401, 404, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const revoked = foundOrThrow(await revokeKey(c.env.DB, id, clock.now()), id);
      await pushPolicyOrThrow(c.env, revoked);
      return c.json(keyView(revoked, clock.now()), 200);
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/keys/{id}/unban",
      operationId: "unbanKey",
      security,
      request: byId,
      responses: {
        200: { description: "The key, no longer banned", content: json(KeyDetailSchema) },
        ...errorResponses(400, 401, 404, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const record = foundOrThrow(await getKey(c.env.DB, id), id);
      const usage = await new QuotaLimiterClient(c.env.QUOTA, id).unbanOrThrow(policyOf(record));
      return c.json({ ...keyView(record, clock.now()), usage: usageView(usage) }, 200);
    },
  );

adminApi.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
  type: "http",
  scheme: "bearer",
  description: "The ADMIN_TOKEN secret",
});
