import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Env as HonoEnv } from "hono";
import { etagOfText } from "../lib/etag";
import { type Route, RouteTable } from "../lib/route-table";
import { BOOKMARK_HEADER } from "../middleware/d1-session";
import { AUTH_FAILURES_PER_MINUTE } from "../quota/windows";
import {
  adminErrorResponses,
  errorResponses,
  json,
  unmeteredErrorResponses,
} from "../schemas/common";
import { registerWebhookEvents } from "../schemas/webhook-event-payloads";
import { forReference } from "./openapi-reference";
import { routeTable } from "./table";

type Document = ReturnType<OpenAPIHono["getOpenAPI31Document"]>;
type Operation = {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<
    string,
    { description?: string; headers?: Record<string, unknown>; content?: unknown }
  >;
};

const text = (description: string) => ({ description, schema: { type: "string" as const } });

const ETAG = text(
  "Weak entity tag of the body; send it as If-None-Match to get 304 when unchanged",
);

/**
 * Headers every API answer carries (middleware/api-response-headers.ts, request-id.ts, hono's
 * timing), added here once rather than on every route.
 */
const COMMON_RESPONSE_HEADERS = {
  "X-Request-Id": text("Your X-Request-Id if it is sane, else Cloudflare's ray id or a UUID"),
  "Server-Timing": text("Time spent per hop: auth, quota, db, cache"),
  "Cache-Control": text(
    "private, no-cache on a successful read of the public API (revalidate with its ETag); no-store on every other answer",
  ),
  Vary: text(
    "Authorization (the answer depends on the key), Origin where CORS is on, and Accept on errors (problem details on request)",
  ),
  "X-Content-Type-Options": text("nosniff"),
  "Content-Security-Policy": text("default-src 'none'; frame-ancestors 'none'"),
};

const BOOKMARK_RESPONSE_HEADER = {
  [BOOKMARK_HEADER]: text(
    "D1 bookmark of this request's session, signed, when the answer read or wrote D1; send it back unchanged to read your own writes",
  ),
};

/**
 * The answers of the pets routes that can carry the D1 bookmark: those whose handler ran in the
 * session (a page, a pet, a creation, a pet not found, an Idempotency-Key reused). Refusals made
 * before the session (401, 429, the 410 after the sunset), validation errors and 304s (the
 * isolate's cache answers them) do not.
 */
const BOOKMARK_STATUSES = new Set(["200", "201", "404", "422"]);

/**
 * Middleware-level behaviour that the route definitions do not describe: the D1 bookmark and
 * conditional requests (If-None-Match → 304) on every operation, and the common headers.
 */
function documentMiddleware(doc: Document): Document {
  for (const path of Object.values(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(path as Record<string, Operation>)) {
      // Only the pets routes run in a D1 session and answer with an ETag; an OPTIONS never
      // reaches their handlers.
      if (!op.tags?.includes("Pets") || method === "options") {
        for (const response of Object.values(op.responses ?? {}))
          response.headers = { ...response.headers, ...COMMON_RESPONSE_HEADERS };
        continue;
      }
      op.parameters = [
        ...(op.parameters ?? []),
        {
          name: BOOKMARK_HEADER,
          in: "header",
          required: false,
          description:
            "The latest x-d1-bookmark you received, unchanged (read-your-writes); any other value is 400",
          schema: { type: "string" },
        },
      ];
      for (const [status, response] of Object.entries(op.responses ?? {}))
        response.headers = {
          ...response.headers,
          ...COMMON_RESPONSE_HEADERS,
          ...(BOOKMARK_STATUSES.has(status) ? BOOKMARK_RESPONSE_HEADER : {}),
        };
      if (method !== "get") continue;
      op.parameters.push({
        name: "If-None-Match",
        in: "header",
        required: false,
        description: "An ETag from an earlier response",
        schema: { type: "string" },
      });
      const ok = op.responses?.["200"];
      if (ok) ok.headers = { ...ok.headers, ETag: ETAG };
      op.responses = {
        ...op.responses,
        // A 304 keeps every header of the 200 it replaces but the body's own
        // (middleware/conditional.ts): the quota, paging, deprecation and bookmark headers too.
        304: {
          description: "Not modified: If-None-Match matched (still counted against the quota)",
          headers: { ...ok?.headers },
        },
      };
    }
  }
  return doc;
}

/**
 * HEAD wherever GET works (Hono answers it from the GET handler): an operation of its own with the
 * GET's parameters, statuses and headers, and no bodies.
 */
function addHeadOperations(doc: Document): void {
  for (const item of Object.values(doc.paths ?? {}) as Record<string, Operation>[]) {
    const get = item.get;
    if (!get) continue;
    const { operationId, summary, description, responses, ...rest } = get;
    const head: Operation = {
      ...rest,
      operationId: `${operationId}Head`,
      summary: `${summary} (headers only)`,
      description: `GET ${operationId} without the body: the same statuses and headers, counted the same way.`,
      responses: Object.fromEntries(
        Object.entries(responses ?? {}).map(([status, { content: _, ...response }]) => [
          status,
          response,
        ]),
      ),
    };
    // The document's methods in the order a reader expects them: GET, HEAD, then the others.
    const { get: _, ...others } = item;
    for (const key of Object.keys(item)) delete item[key];
    Object.assign(item, { get, head, ...others });
  }
}

/** The headers of a CORS preflight's 204 (middleware/cors.ts). */
const PREFLIGHT_HEADERS = {
  "Access-Control-Allow-Origin": text("The requesting origin, one of CORS_ORIGINS"),
  "Access-Control-Allow-Methods": text("The methods of this path"),
  "Access-Control-Allow-Headers": text("The request headers a browser may send"),
  "Timing-Allow-Origin": text("The requesting origin: its page may read Server-Timing"),
  "Access-Control-Max-Age": {
    description: "Seconds a browser may keep this answer",
    schema: { type: "integer" as const },
  },
};

/** `/v1/pets/:petId` under `prefix` "/v1" → `/pets/{petId}`. */
const documentPath = (route: Route, prefix: string) =>
  route.path.slice(prefix.length).replace(/:([A-Za-z]+)/g, "{$1}");

/** `/keys/{id}/usage` → `KeysIdUsage`: a name for an operation on the path. */
const pathName = (path: string) =>
  path
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");

/**
 * An OPTIONS operation for each route of `audience` under `prefix`: the only method a path lacks
 * that a document can name, so the one operation that shows its 405 (with Allow) and, on the
 * public API, the CORS preflight's 204. Any other method a path lacks gets the same 405.
 */
function registerOptionsOperations(
  api: OpenAPIHono,
  audience: "public" | "operator",
  prefix: string,
): void {
  const tagOf = new Map<string, string[]>();
  for (const d of api.openAPIRegistry.definitions)
    if (d.type === "route" && d.route.tags) tagOf.set(d.route.path, d.route.tags);
  for (const route of routeTable.routes) {
    if (route.audience !== audience || !route.path.startsWith(`${prefix}/`)) continue;
    const path = documentPath(route, prefix);
    const methods = RouteTable.methodsOf(route).join(", ");
    const names = [...path.matchAll(/\{([A-Za-z]+)\}/g)].map((m) => m[1]!);
    const params = names.length
      ? {
          params: z.object(
            Object.fromEntries(
              names.map((name) => [
                name,
                z.string().openapi({ param: { name, in: "path" }, description: "Any value" }),
              ]),
            ),
          ),
        }
      : {};
    const isPublic = audience === "public";
    api.openAPIRegistry.registerPath(
      createRoute({
        method: "options",
        path,
        operationId: `options${pathName(path)}`,
        tags: tagOf.get(path) ?? ["Document"],
        summary: isPublic
          ? "CORS preflight; any other OPTIONS is 405"
          : "Always 405 (after the admin token)",
        description: isPublic
          ? `A CORS preflight (\`Origin\` and \`Access-Control-Request-Method\`) from an origin in the environment's CORS_ORIGINS, for one of this path's methods (${methods}), gets 204 without a key. Any other OPTIONS (and any other method this path does not list) is authenticated like every /v1 request (401 without a usable key) and then answered 405 \`method_not_allowed\` with \`Allow: ${methods}\`.`
          : `The operator API answers no preflight: an OPTIONS (like any other method this path does not list) is checked for the admin token like every request (401 without one, 403 for a read-only one) and then answered 405 \`method_not_allowed\` with \`Allow: ${methods}\`.`,
        security: isPublic ? [{ bearerAuth: [] }, {}] : [{ adminToken: [] }],
        request: {
          ...params,
          ...(isPublic
            ? {
                headers: z.object({
                  origin: z.string().optional().openapi({ description: "The page's origin" }),
                  "access-control-request-method": z
                    .string()
                    .optional()
                    .openapi({ description: "The method the page wants to use" }),
                }),
              }
            : {}),
        },
        responses: isPublic
          ? {
              204: {
                description:
                  "CORS preflight granted (only where CORS_ORIGINS lists the origin; no rate-limit headers)",
                headers: PREFLIGHT_HEADERS,
              },
              // OPTIONS is authenticated on every path, the document's too (not one of its own
              // methods outside every quota): its errors carry rate-limit headers like any other.
              ...errorResponses(400, 401, 405, 429, 500, 503),
            }
          : adminErrorResponses(400, 401, 403, 405, 429),
      }),
    );
  }
}

/** The document describes itself: GET /openapi.json, public, outside every quota. */
function registerDocumentOperation(api: OpenAPIHono, which: string): void {
  const etag = {
    ETag: { description: "Weak entity tag of this document", schema: { type: "string" as const } },
  };
  api.openAPIRegistry.registerPath(
    createRoute({
      method: "get",
      path: "/openapi.json",
      operationId: "getOpenApiDocument",
      tags: ["Document"],
      summary: `This document: the ${which} as OpenAPI 3.1`,
      description:
        "This document, generated from the schemas the service validates requests with. Public: no credentials, not counted against any quota, and without rate-limit headers. If-None-Match with its ETag gives 304.",
      security: [],
      request: {
        headers: z.object({
          "if-none-match": z
            .string()
            .optional()
            .openapi({ description: "The ETag of a copy you hold" }),
        }),
      },
      responses: {
        200: {
          description: "This document",
          headers: etag,
          content: json(
            z.record(z.string(), z.unknown()).openapi({ description: "An OpenAPI 3.1 document" }),
          ),
        },
        304: { description: "Not modified: If-None-Match matched", headers: etag },
        ...unmeteredErrorResponses(500),
      },
    }),
  );
}

/** The document's own tag. */
const DOCUMENT_TAG = {
  name: "Document",
  description: "This OpenAPI document, public and outside every quota",
};

/** Who runs the API, under which licence: the same for every document the service serves. */
export const DOCUMENT_INFO = {
  license: { name: "MIT", identifier: "MIT" },
  contact: { name: "Animal Store API team" },
};

/** The document's `servers`: this environment's configured PUBLIC_ORIGIN; relative while it is "". */
export const serversFor = (
  { PUBLIC_ORIGIN, ENVIRONMENT }: { PUBLIC_ORIGIN: string; ENVIRONMENT: string },
  prefix: string,
) => [
  {
    url: `${PUBLIC_ORIGIN}${prefix}`,
    description: `The ${ENVIRONMENT} environment${PUBLIC_ORIGIN ? "" : " (this origin)"}`,
  },
];

type ServerConfig = Parameters<typeof serversFor>[0];

type Json = unknown;
type HeaderMap = Record<string, Json>;
type Responses = Record<string, { headers?: HeaderMap }>;

/**
 * `allOf: [{$ref}, {description}]` (what zod-to-openapi makes of a described reference) becomes
 * `{$ref, description, …}`, which OpenAPI 3.1 allows: generators then see the plain reference
 * (openapi-typescript turned the wrapper into `T & unknown`).
 */
function unwrapDescribedRefs(node: Json): Json {
  if (Array.isArray(node)) return node.map(unwrapDescribedRefs);
  if (!node || typeof node !== "object") return node;
  const obj = Object.fromEntries(
    Object.entries(node).map(([k, v]) => [k, unwrapDescribedRefs(v)]),
  ) as Record<string, Json>;
  const allOf = obj.allOf;
  if (!Array.isArray(allOf) || allOf.length !== 2) return obj;
  const [ref, extra] = allOf as [Record<string, Json>, Record<string, Json>];
  const annotations = ["description", "default", "example", "deprecated"];
  if (typeof ref?.$ref !== "string" || Object.keys(ref).length !== 1) return obj;
  if (!extra || !Object.keys(extra).every((k) => annotations.includes(k))) return obj;
  const { allOf: _, ...rest } = obj;
  return { $ref: ref.$ref, ...extra, ...rest };
}

/**
 * Every response header becomes a `$ref` to one `components/headers` entry, named after the
 * header; a header whose definition differs between operations gets `<Header>.<operationId>`.
 */
function shareHeaders(doc: Document): void {
  doc.components ??= {};
  const components = doc.components as { headers?: Record<string, Json> };
  const shared: Record<string, Json> = {};
  const nameFor = (header: string, definition: Json, operationId: string) => {
    const text = JSON.stringify(definition);
    for (const name of [header, `${header}.${operationId}`]) {
      if (shared[name] === undefined) shared[name] = definition;
      if (JSON.stringify(shared[name]) === text) return name;
    }
    throw new Error(`header ${header} defined three ways`);
  };
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(
      item as Record<string, { operationId?: string; responses?: Responses }>,
    )) {
      for (const response of Object.values(op.responses ?? {})) {
        if (!response.headers) continue;
        response.headers = Object.fromEntries(
          Object.entries(response.headers).map(([header, definition]) => [
            header,
            {
              $ref: `#/components/headers/${nameFor(header, definition, op.operationId ?? "operation")}`,
            },
          ]),
        );
      }
    }
  }
  components.headers = Object.fromEntries(
    Object.entries(shared).sort(([a], [b]) => a.localeCompare(b)),
  );
}

/** Shared finishing of a generated document: plain references and header components. */
export function finishDocument(doc: Document): Document {
  addHeadOperations(doc);
  const finished = unwrapDescribedRefs(doc) as Document;
  shareHeaders(finished);
  return finished;
}

/**
 * OpenAPI 3.1 of the public API, as JSON text with its ETag, generated from the zod schemas once
 * per isolate (per environment and public origin).
 */
export function openApiDocument(...apis: Pick<OpenAPIHono, "openAPIRegistry">[]) {
  // One registry over every public route group, in the order given.
  const api = new OpenAPIHono();
  for (const group of apis) api.route("/", group as unknown as OpenAPIHono);
  registerDocumentOperation(api, "public API");
  registerOptionsOperations(api, "public", "/v1");
  const build = (config: ServerConfig) =>
    finishDocument(
      documentMiddleware(
        api.getOpenAPI31Document({
          openapi: "3.1.0",
          info: {
            title: "Animal Store API",
            version: "1.0.0",
            description: [
              "List, add and fetch animals. This document is the API's contract; the interactive reference is at `/docs`.",
              "",
              "Every operation needs `Authorization: Bearer <API key>` (`pet_live_…` in production, `pet_test_…` elsewhere).",
              "Errors are `{code, message, status}` with `Content-Type: application/json`.",
              "Every response carries the quota headers (`X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit-Policy`, `RateLimit`) except this document, which is public and outside every quota, a CORS preflight's 204, and the 500 of a misconfigured deployment, which answers before any work; 429 and 503 carry `Retry-After` (seconds).",
              "HEAD works wherever GET does (same status and headers, no body). A method a path does not list is 405 with `Allow`; each path's OPTIONS operation shows it.",
              "",
              "- With a usable key they describe the key's windows (`minute` and `day`).",
              `- When no key could be used (none, another scheme, a malformed header, an unknown, revoked, disabled or expired key, a rolled secret) they describe the client's failed-authentication window: ${AUTH_FAILURES_PER_MINUTE} a minute per client address (\`"minute";q=${AUTH_FAILURES_PER_MINUTE};w=60\`). Only a token that matches no key counts in it; the other answers read it as the serving isolate last learnt it from the client's counted guesses (a full window when it has learnt nothing this minute), so \`Remaining\` may be higher than the shared count.`,
              "- While the key's rate limiter cannot be reached, requests are let through within a fallback allowance of the key's per-minute limit per minute (per isolate); the headers then describe that allowance and `RateLimit-Policy`/`RateLimit` name it `\"fallback\"`, since the key's own windows cannot be known.",
              "- During a temporary ban `X-RateLimit-Remaining` is 0 and `X-RateLimit-Reset` the moment a request can succeed; `RateLimit` still shows each window as it is.",
            ].join("\n"),
            ...DOCUMENT_INFO,
          },
          servers: serversFor(config, "/v1"),
          tags: [
            { name: "Pets", description: "The animals in the store: list, add, fetch" },
            {
              name: "Usage",
              description: "Your key's own quota and usage history, free of charge",
            },
            DOCUMENT_TAG,
          ],
        }),
      ),
    );
  return servedOncePerServer((config) => forReference(build(config), config, "public"));
}

/** The operator document's tags: one per kind of resource. */
const ADMIN_TAGS = [
  {
    name: "Keys",
    description:
      "API keys: issue, list, read, change, disable, revoke, roll the secret, lift a ban",
  },
  {
    name: "Usage",
    description: "Usage history: a key's requests per UTC day, and every key's totals for one day",
  },
  {
    name: "Audit",
    description: "The audit trail: who changed which key or webhook endpoint, when, and how",
  },
  {
    name: "Webhooks",
    description:
      "Webhook endpoints: where usage alerts and key events are sent, signed as Standard Webhooks specifies",
  },
  { name: "Operator", description: "The admin token a request comes with: its name and access" },
  DOCUMENT_TAG,
];

/**
 * OpenAPI 3.1 of the operator API, from the same zod schemas, as JSON text with its ETag, once per
 * isolate (per environment and public origin). It holds no data, so it is served without a token;
 * it is separate from the public document.
 */
export function adminOpenApiDocument<E extends HonoEnv>(adminApi: OpenAPIHono<E>) {
  const api = new OpenAPIHono();
  api.route("/", adminApi as unknown as OpenAPIHono);
  registerDocumentOperation(api, "operator API");
  registerOptionsOperations(api, "operator", "/admin/v1");
  // What the service sends to webhook endpoints, as OpenAPI 3.1 webhooks (one per event type).
  registerWebhookEvents(api.openAPIRegistry);
  const build = (config: ServerConfig) => {
    const doc = api.getOpenAPI31Document({
      openapi: "3.1.0",
      info: {
        title: "Animal Store API — operator (admin) API",
        version: "1.0.0",
        description: [
          "Issue and manage API keys, read usage history and the audit trail.",
          "",
          "Every operation needs `Authorization: Bearer <admin token>` (ADMIN_TOKEN, or a named token of ADMIN_TOKENS); the token's name is the actor in the audit trail.",
          "A read-only token (one of ADMIN_READ_TOKENS) may call the operations that read (GET); the others answer it 403 `forbidden`.",
          "Errors are `{code, message, status}` with `Content-Type: application/json`.",
          "A query parameter an operation does not list is refused (400, naming it), so a misspelt filter never reads as no filter. HEAD works wherever GET does; a method a path does not list is 405 with `Allow`, shown under each path's OPTIONS.",
        ].join("\n"),
        ...DOCUMENT_INFO,
      },
      servers: serversFor(config, "/admin/v1"),
      tags: ADMIN_TAGS,
    });
    for (const path of Object.values(doc.paths ?? {}))
      for (const op of Object.values(path as Record<string, Operation>))
        for (const response of Object.values(op.responses ?? {}))
          response.headers = { ...response.headers, ...COMMON_RESPONSE_HEADERS };
    return finishDocument(doc);
  };
  return servedOncePerServer((config) => forReference(build(config), config, "operator"));
}

/**
 * A document's JSON text and ETag, serialised once per isolate for each environment and public
 * origin (the only settings the document depends on).
 */
function servedOncePerServer(build: (config: ServerConfig) => Document) {
  const cached = new Map<string, { text: string; etag: string }>();
  return (config: ServerConfig) => {
    const cacheKey = `${config.ENVIRONMENT} ${config.PUBLIC_ORIGIN}`;
    let entry = cached.get(cacheKey);
    if (!entry) {
      const text = JSON.stringify(build(config));
      entry = { text, etag: etagOfText(text) };
      cached.set(cacheKey, entry);
    }
    return entry;
  };
}
