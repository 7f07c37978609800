import { createRoute, OpenAPIHono, type z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { generateApiKey, newKeyId } from "../../auth/key-format";
import { pushPolicyOrThrow } from "../../auth/push-policy";
import { type AuditAction, appendAudit, clearBanStatement } from "../../db/audit";
import {
  changeKey,
  getKey,
  insertKey,
  type KeyRecord,
  type KeySettings,
  listKeys,
  rollKeySecret,
  settingsOf,
} from "../../db/keys";
import { lastUsedDays, type UsageDay } from "../../db/usage-history";
import { outboxEventIfChangedStatement, sendOutboxEvents } from "../../db/webhook-event-outbox";
import { runAfterResponse } from "../../lib/after-response";
import { clock, isoTime } from "../../lib/clock";
import { type Config, secretOrThrow } from "../../lib/config";
import { sha256Hex } from "../../lib/crypto";
import { ApiError } from "../../lib/errors";
import { log } from "../../lib/log";
import { eventId, type ProducedEvent } from "../../lib/webhook-events";
import { jsonBody, noBody } from "../../middleware/json-body";
import { validationHook } from "../../middleware/validation-hook";
import { type Limits, limitsOrThrow, type Plan } from "../../quota/plans";
import type { KeyUsage } from "../../quota/windows";
import { adminErrorResponses, json, NoQuerySchema } from "../../schemas/common";
import {
  CreatedKeySchema,
  CreateKeySchema,
  KeyDetailSchema,
  KeyIdParamSchema,
  KeyPageSchema,
  KeySchema,
  type ListedKeySchema,
  ListKeysQuerySchema,
  RollKeySchema,
  UPDATABLE_KEY_FIELDS,
  UpdateKeySchema,
} from "../../schemas/keys";
import { AdminIdentitySchema } from "../../schemas/operator";
import { type AdminEnv, auditOf, cursorSecrets, foundOrThrow, security } from "./admin-env";
import { historyApi } from "./history-routes";
import { adminKeyQuota, listedKeyReportOrThrow } from "./key-quota";
import {
  decodeKeyCursorOrThrow,
  fieldChanges,
  keyCursorValues,
  keyView,
  pageOf,
  usageView,
} from "./key-views";
import { webhookEndpointsApi } from "./webhook-routes";
import { writeWhileUnchangedOrThrow } from "./write-while-unchanged";

const byId = { params: KeyIdParamSchema, query: NoQuerySchema };

/** The webhook event an admin change to a key makes: what makes it once is its `window`. */
interface KeyEvent {
  type: "key.revoked" | "key.rolled";
  window: number;
  data: Record<string, unknown>;
}

/** `event` about key `keyId`, happening at `at`, with its id (the same for the same window). */
async function producedKeyEvent(
  keyId: string,
  event: KeyEvent,
  at: number,
): Promise<ProducedEvent> {
  return {
    id: await eventId(event.type, keyId, event.window),
    type: event.type,
    at,
    keyId,
    data: event.data,
  };
}

/**
 * Queues, after the answer (the operator does not wait for the queue), the event of type `type`
 * for `window` of key `keyId` that the change kept in D1's webhook outbox, in its own batch; an
 * event the queue refuses stays there for the hourly sweep. Repeating the change (its event id is
 * the same) sends what an earlier attempt left.
 */
function sendKeyEventAfterResponse(
  c: Context<AdminEnv>,
  type: KeyEvent["type"],
  keyId: string,
  window: number,
): void {
  runAfterResponse(
    c,
    eventId(type, keyId, window).then((id) =>
      sendOutboxEvents(c.env.DB, c.env.WEBHOOK_QUEUE, [id]),
    ),
  );
}

/**
 * What a listed key has been doing, from `report` (its quota object's, null when the object could
 * not be reached) and `storedLastDay`, the last day D1 holds a request for. No D1 write on the
 * key's requests: today lives in the object.
 */
function activityOf(
  key: KeyRecord,
  report: { usage: KeyUsage; days: UsageDay[] } | null,
  storedLastDay: string | null,
): z.infer<typeof ListedKeySchema>["activity"] {
  if (!report) return null;
  const { usage, days } = report;
  const used = days.filter(
    (d) =>
      d.admitted + d.refused.rate_limited + d.refused.quota_exceeded + d.refused.key_banned > 0,
  );
  const heldLastDay = used.at(-1)?.day ?? null;
  return {
    lastUsedDay:
      heldLastDay !== null && (storedLastDay === null || heldLastDay > storedLastDay)
        ? heldLastDay
        : storedLastDay,
    today: { used: usage.day.count, limit: usage.day.limit ?? key.limits.perDay },
    bannedUntil: isoTime(usage.bannedUntil),
  };
}

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

/**
 * A new secret for key `id`, tagged with its id (auth/key-format.ts). Throws ConfigError (500,
 * logged) when KEY_TAG_SECRET is unset: a key is never issued that could not be routed.
 */
function newSecretOrThrow(config: Config, id: string) {
  return generateApiKey(config.ENVIRONMENT, id, secretOrThrow(config, "KEY_TAG_SECRET"));
}

/**
 * Reads the key and lets `writeIfUnchanged` write it, on condition that its version is still the
 * one read (writeWhileUnchangedOrThrow: decided again on the fresh key when another write got
 * there first). Returns the key as written. 404 for an unknown key; 503 if it keeps changing under
 * us (`operation` names what this request tried in the message).
 */
function writeKeyOrThrow(
  c: Context<AdminEnv>,
  id: string,
  operation: "change" | "roll",
  writeIfUnchanged: (current: KeyRecord, now: number) => Promise<KeyRecord | null>,
): Promise<KeyRecord> {
  return writeWhileUnchangedOrThrow(
    async () => foundOrThrow(await getKey(c.env.DB, id), id),
    writeIfUnchanged,
    {
      now: () => clock.now(),
      keptChangingMessage: `The key kept changing while this request tried to ${operation} it; repeat it.`,
    },
  );
}

/** A revoked key is final: every change to it is refused with 409 key_revoked. */
function notRevokedOrThrow(current: KeyRecord, change: string): void {
  if (current.revokedAt !== null)
    throw new ApiError(
      "key_revoked",
      `The key was revoked at ${isoTime(current.revokedAt)}; a revoked key cannot be ${change}.`,
    );
}

/**
 * Lets `decide` compute the key's new settings and the audit action from its current record, and
 * writes both in one batch (writeKeyOrThrow: decided again if the key changed in between). A
 * decision that changes nothing writes nothing, and leaves no audit entry. Returns the key as
 * written.
 */
async function changeKeyOrThrow(
  c: Context<AdminEnv>,
  id: string,
  decide: (
    current: KeyRecord,
    now: number,
  ) => { next: KeySettings; action: AuditAction; event?: KeyEvent },
): Promise<KeyRecord> {
  return writeKeyOrThrow(c, id, "change", async (current, now) => {
    const { next, action, event } = decide(current, now);
    const expected: KeyRecord = {
      ...current,
      ...next,
      limits: limitsOrThrow(next.plan, next.ownLimits),
    };
    const changes = fieldChanges(current, expected);
    if (Object.keys(changes).length === 0) return current;
    const alongside = event
      ? [outboxEventIfChangedStatement(c.env.DB, await producedKeyEvent(id, event, now), now)]
      : [];
    return changeKey(
      c.env.DB,
      id,
      current.version,
      next,
      auditOf(c, action, id, changes),
      alongside,
    );
  });
}

export const adminApi = new OpenAPIHono<AdminEnv>({ defaultHook: validationHook })
  .openapi(
    createRoute({
      method: "get",
      path: "/whoami",
      operationId: "whoAmI",
      tags: ["Operator"],
      summary: "The admin token this request came with",
      description:
        'Its name (the actor the audit trail records) and its access: "full", or "read" for a read-only token of ADMIN_READ_TOKENS, whose writes are refused (`forbidden`). The console asks it to offer only the actions the token may take.',
      security,
      request: { query: NoQuerySchema },
      responses: {
        200: { description: "The token's name and access", content: json(AdminIdentitySchema) },
        // It reads nothing stored: no 503.
        ...adminErrorResponses(400, 401, 429),
      },
    }),
    (c) => c.json({ name: c.var.adminActor, access: c.var.adminAccess }, 200),
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/keys",
      operationId: "createKey",
      tags: ["Keys"],
      summary: "Issue a new API key",
      description:
        "Creates a key on a plan and returns it with its secret, which is shown only this once (only its hash is stored); Location points at the new key. Enterprise keys need their own `limits`, other plans must not give any; `expiresAt` must be in the future. `region` places the key's quota object near the key's consumer (created at its first request; without it, near that request). The creation is recorded in the audit trail.",
      security,
      middleware: jsonBody,
      request: { query: NoQuerySchema, body: { required: true, content: json(CreateKeySchema) } },
      responses: {
        201: {
          description: "The new key, with its secret (shown once)",
          headers: {
            Location: {
              description: "The new key's URL: /admin/v1/keys/{id}",
              schema: { type: "string" as const },
            },
          },
          content: json(CreatedKeySchema),
        },
        ...adminErrorResponses(400, 401, 403, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const now = clock.now();
      const id = newKeyId();
      const { key, displayPrefix } = await newSecretOrThrow(c.var.config, id);
      const fields = {
        id,
        name: body.name,
        prefix: displayPrefix,
        plan: body.plan,
        ownLimits: ownLimitsOrThrow(body.plan, body.limits),
        expiresAt: expiryOrThrow(body.expiresAt, now),
        ownerId: body.ownerId ?? null,
        meta: body.meta ?? null,
        region: body.region ?? null,
        now,
      };
      // The audit entry describes the key as it will be; it is written in the same batch.
      const planned: KeyRecord = {
        ...fields,
        limits: limitsOrThrow(fields.plan, fields.ownLimits),
        version: 1,
        createdAt: now,
        updatedAt: now,
        revokedAt: null,
        disabledAt: null,
        rolledAt: null,
        previousSecretExpiresAt: null,
        firstUsedAt: null,
        bannedUntil: null,
      };
      const record = await insertKey(
        c.env.DB,
        { ...fields, hash: await sha256Hex(key) },
        auditOf(c, "create", id, fieldChanges(null, planned)),
      );
      c.header("Location", `/admin/v1/keys/${record.id}`);
      return c.json({ ...keyView(record, now), key }, 201);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/keys",
      operationId: "listKeys",
      tags: ["Keys"],
      summary: "List keys",
      description:
        "Keys in creation order, a page at a time (`cursor` is the previous page's `nextCursor`), optionally only those of one plan, state (or banned) or owner, or found by `q` (the start of the name, or of the secret). Each key comes with its activity, read live from its quota object: the last day it was used, today's requests against the day quota, and any ban (a key never used has no object yet: zeros, and none is created). Secrets are never returned.",
      security,
      request: { query: ListKeysQuerySchema },
      responses: {
        200: {
          description: "Keys in creation order, narrowed by the filters given",
          content: json(KeyPageSchema),
        },
        ...adminErrorResponses(400, 401, 429, 503),
      },
    }),
    async (c) => {
      const { limit, cursor, plan, state, ownerId, q } = c.req.valid("query");
      const now = clock.now();
      const keys = await listKeys(
        c.env.DB,
        limit + 1,
        cursor ? await decodeKeyCursorOrThrow(cursorSecrets(c), "keys", cursor) : undefined,
        { plan, state, ownerId, search: q, now },
      );
      const { page, nextCursor } = await pageOf(keys, limit, {
        secrets: cursorSecrets(c),
        list: "keys",
        valuesOf: keyCursorValues,
      });
      // The days D1 holds and one call per listed key's object, all at once.
      const [lastUsed, reports] = await Promise.all([
        lastUsedDays(
          c.env.DB,
          page.map((k) => k.id),
        ),
        Promise.all(page.map((k) => listedKeyReportOrThrow(c.env, k).catch(() => null))),
      ]);
      const data = page.map((k, i) => ({
        ...keyView(k, now),
        activity: activityOf(k, reports[i] ?? null, lastUsed.get(k.id) ?? null),
      }));
      return c.json({ data, nextCursor }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/keys/{id}",
      operationId: "getKey",
      tags: ["Keys"],
      summary: "Get a key with its current usage",
      description:
        "The key, plus its current minute and day counts and any ban, read live from the key's quota object (`usage` is null if that object could not be reached; a key never used has no object yet: zeros, and none is created). 404 if no key has this id.",
      security,
      request: byId,
      responses: {
        200: {
          description: "The key with its current usage and ban",
          content: json(KeyDetailSchema),
        },
        ...adminErrorResponses(400, 401, 404, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const record = foundOrThrow(await getKey(c.env.DB, id), id);
      const usage = await adminKeyQuota(c.env, c.req.raw, record).usage();
      return c.json({ ...keyView(record, clock.now()), usage: usageView(usage) }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "patch",
      path: "/keys/{id}",
      operationId: "updateKey",
      tags: ["Keys"],
      summary: "Change a key's settings",
      description: `Changes any of ${UPDATABLE_KEY_FIELDS}; fields not given keep their value. A region applies only while the key has never been used: its quota object, once created, stays where it is. The change applies from the key's next request, in every isolate. \`enabled: false\` refuses the key at once. A revoked key is final: any change to it is 409 \`key_revoked\`. Recorded in the audit trail as update, disable or enable; a PATCH that changes nothing answers 200 with the key as it is and writes no audit entry. 404 if no key has this id; 503 if the key kept changing under concurrent writes.`,
      security,
      middleware: jsonBody,
      request: { ...byId, body: { required: true, content: json(UpdateKeySchema) } },
      responses: {
        200: { description: "The updated key", content: json(KeySchema) },
        ...adminErrorResponses(400, 401, 403, 404, 409, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const body = c.req.valid("json");
      const updated = await changeKeyOrThrow(c, id, (current, now) => {
        notRevokedOrThrow(current, "changed, enabled or disabled");
        const plan = body.plan ?? current.plan;
        // Moving to enterprise without new limits keeps none to fall back on, so limits are required then.
        const limits =
          body.limits ??
          (plan === "enterprise" && current.plan === "enterprise" ? current.limits : undefined);
        const disabledAt =
          body.enabled === undefined
            ? current.disabledAt
            : body.enabled
              ? null
              : (current.disabledAt ?? now);
        const next: KeySettings = {
          ...settingsOf(current),
          name: body.name ?? current.name,
          plan,
          ownLimits: ownLimitsOrThrow(plan, limits),
          disabledAt,
          expiresAt:
            body.expiresAt === undefined
              ? current.expiresAt
              : body.expiresAt === null
                ? null
                : expiryOrThrow(body.expiresAt, now),
          ownerId: body.ownerId === undefined ? current.ownerId : body.ownerId,
          meta: body.meta === undefined ? current.meta : body.meta,
          region: body.region === undefined ? current.region : body.region,
        };
        const enabledChanged = (disabledAt === null) !== (current.disabledAt === null);
        const action: AuditAction = enabledChanged
          ? disabledAt === null
            ? "enable"
            : "disable"
          : "update";
        return { next, action };
      });
      // Pushed even when nothing changed: repeating a change whose push failed (503) is how the
      // operator gets it enforced, and the push is idempotent.
      await pushPolicyOrThrow(c.env, updated);
      return c.json(keyView(updated, clock.now()), 200);
    },
  )
  .openapi(
    createRoute({
      method: "delete",
      path: "/keys/{id}",
      operationId: "revokeKey",
      tags: ["Keys"],
      summary: "Revoke a key",
      description:
        "Revokes the key for good: it is refused (401) from its next request on and cannot be enabled or rolled afterwards. Idempotent: revoking a revoked key answers 200 with the key as it is (its first revocation time) and writes no audit entry. Recorded in the audit trail. 404 if no key has this id. Takes no body, or `{}`: one with fields is a 400 naming them, one that is not JSON a 415.",
      middleware: noBody,
      security,
      request: byId,
      responses: {
        200: {
          description: "The revoked key; refused from its next request on",
          content: json(KeySchema),
        },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      // Final and idempotent: a key revoked earlier keeps its first revocation time, and
      // revoking it again changes nothing (no write, no audit entry).
      const revoked = await changeKeyOrThrow(c, id, (current, now) => ({
        next: { ...settingsOf(current), revokedAt: current.revokedAt ?? now },
        action: "revoke",
        // Kept with the revocation, in its batch (written only if the key was not revoked yet).
        event: { type: "key.revoked", window: now, data: { revokedAt: isoTime(now) } },
      }));
      // Pushed again when the key was revoked already: a revocation answered 503 (saved, not
      // pushed) is enforced by repeating it.
      await pushPolicyOrThrow(c.env, revoked);
      if (revoked.revokedAt !== null)
        sendKeyEventAfterResponse(c, "key.revoked", id, revoked.revokedAt);
      return c.json(keyView(revoked, clock.now()), 200);
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/keys/{id}/unban",
      operationId: "unbanKey",
      tags: ["Keys"],
      summary: "Lift a key's temporary ban",
      description:
        "Lifts the temporary ban held in the key's quota object (during which its requests get 429), so its next request is counted as usual. Recorded in the audit trail; unbanning a key that is not banned answers 200 and writes no audit entry. Answers with the key and its current usage. 404 if no key has this id. Takes no body, or `{}`: one with fields is a 400 naming them, one that is not JSON a 415.",
      middleware: noBody,
      security,
      request: byId,
      responses: {
        200: { description: "The key, no longer banned", content: json(KeyDetailSchema) },
        ...adminErrorResponses(400, 401, 403, 404, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const record = foundOrThrow(await getKey(c.env.DB, id), id);
      // One call: the object reports when the ban would have ended as it lifts it.
      const { bannedUntilBefore, usage } = await adminKeyQuota(
        c.env,
        c.req.raw,
        record,
      ).unbanOrThrow();
      // The ban lives in the key's object, not in D1, so the entry follows the unban (the object
      // keeps the key.unbanned webhook event in its outbox as it lifts the ban); if D1
      // fails here the answer is 503 and the operator repeats the (idempotent) unban. A key
      // that was not banned is unchanged: no entry.
      if (bannedUntilBefore !== null) {
        await appendAudit(
          c.env.DB,
          auditOf(c, "unban", id, {
            bannedUntil: { before: isoTime(bannedUntilBefore), after: isoTime(usage.bannedUntil) },
          }),
          [clearBanStatement(c.env.DB, id)],
        );
      }
      return c.json({ ...keyView(record, clock.now()), usage: usageView(usage) }, 200);
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/keys/{id}/roll",
      operationId: "rollKey",
      tags: ["Keys"],
      summary: "Roll a key's secret",
      description:
        "Issues a new secret for the same key (same id, plan, counters and quota object) and returns it, shown only this once. The old secret keeps working for `gracePeriodSeconds` (default one day; 0 ends it at once, everywhere within 2 s), then gets 401. A revoked key cannot be rolled (409 `key_revoked`). Recorded in the audit trail. 404 if no key has this id.",
      security,
      middleware: jsonBody,
      request: { ...byId, body: { required: true, content: json(RollKeySchema) } },
      responses: {
        201: {
          description:
            "The key with a new secret (shown once): same id, plan, counters and quota object. The old secret works until previousSecretExpiresAt, then gets 401.",
          content: json(CreatedKeySchema),
        },
        ...adminErrorResponses(400, 401, 403, 404, 409, 413, 415, 429, 503),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const { gracePeriodSeconds } = c.req.valid("json");
      const { key, displayPrefix } = await newSecretOrThrow(c.var.config, id);
      const hash = await sha256Hex(key);
      const rolled = await writeKeyOrThrow(c, id, "roll", async (current, now) => {
        notRevokedOrThrow(current, "rolled");
        const previousExpiresAt = now + gracePeriodSeconds * 1000;
        const audit = auditOf(c, "roll", id, {
          prefix: { before: current.prefix, after: displayPrefix },
          previousSecretExpiresAt: {
            before: isoTime(current.previousSecretExpiresAt),
            after: isoTime(previousExpiresAt),
          },
        });
        // One event per roll: the key's version after it. Kept with the roll, in its batch.
        const event = await producedKeyEvent(
          id,
          {
            type: "key.rolled",
            window: current.version + 1,
            data: {
              rolledAt: isoTime(audit.at),
              previousSecretExpiresAt: isoTime(previousExpiresAt),
            },
          },
          now,
        );
        return rollKeySecret(
          c.env.DB,
          id,
          current.version,
          { hash, prefix: displayPrefix, previousExpiresAt },
          audit,
          [outboxEventIfChangedStatement(c.env.DB, event, now)],
        );
      });
      // Isolates holding the old secret's record drop it on its next request (newer version).
      // The new secret must reach the operator whatever happens: if the push fails, those
      // isolates keep the old record for at most the key cache's 30 s, so it is only logged.
      await pushPolicyOrThrow(c.env, rolled).catch((err: unknown) =>
        log("warn", "rolled key's policy not pushed; caches expire on their own", {
          keyId: id,
          error: String(err),
        }),
      );
      sendKeyEventAfterResponse(c, "key.rolled", id, rolled.version);
      return c.json({ ...keyView(rolled, clock.now()), key }, 201);
    },
  );

// Usage history and the audit trail.
adminApi.route("/", historyApi);
// Webhook endpoints.
adminApi.route("/", webhookEndpointsApi);

adminApi.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
  type: "http",
  scheme: "bearer",
  description: "An admin token: ADMIN_TOKEN, or one of the named ADMIN_TOKENS",
});
