import { OpenAPIHono } from "@hono/zod-openapi";
import type { Env as HonoEnv } from "hono";
import { etagOfText } from "../lib/etag";
import { BOOKMARK_HEADER } from "../middleware/d1-session";
import { AUTH_FAILURES_PER_MINUTE } from "../quota/windows";
import { RATE_LIMIT_HEADERS } from "../schemas/headers";

type Document = ReturnType<OpenAPIHono["getOpenAPI31Document"]>;
type Operation = {
  tags?: string[];
  parameters?: unknown[];
  responses?: Record<string, { description?: string; headers?: Record<string, unknown> }>;
};

const text = (description: string) => ({ description, schema: { type: "string" } });

const ETAG = text(
  "Weak entity tag of the body; send it as If-None-Match to get 304 when unchanged",
);

/** Headers every /v1 response carries, added here once rather than on every route. */
const COMMON_RESPONSE_HEADERS = {
  "X-Request-Id": text("Your X-Request-Id if it is sane, else Cloudflare's ray id or a UUID"),
  "Server-Timing": text("Time spent per hop: auth, quota, db"),
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
      // Only the pets routes run in a D1 session and answer with an ETag.
      if (!op.tags?.includes("Pets")) {
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
        304: {
          description: "Not modified: If-None-Match matched (still counted against the quota)",
          headers: { ...RATE_LIMIT_HEADERS, ETag: ETAG, ...COMMON_RESPONSE_HEADERS },
        },
      };
    }
  }
  return doc;
}

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
              "Every response carries the quota headers (`X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`, `RateLimit-Policy`, `RateLimit`) except this document, which is public and outside every quota; 429 and 503 carry `Retry-After` (seconds).",
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
          ],
        }),
      ),
    );
  return servedOncePerServer(build);
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
  { name: "Audit", description: "The audit trail: who changed which key, when, and how" },
  { name: "Operator", description: "The admin token a request comes with: its name and access" },
];

/**
 * OpenAPI 3.1 of the operator API, from the same zod schemas, as JSON text with its ETag, once per
 * isolate (per environment and public origin). It holds no data, so it is served without a token;
 * it is separate from the public document.
 */
export function adminOpenApiDocument<E extends HonoEnv>(api: OpenAPIHono<E>) {
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
        ].join("\n"),
        ...DOCUMENT_INFO,
      },
      servers: serversFor(config, "/admin/v1"),
      tags: ADMIN_TAGS,
    });
    for (const path of Object.values(doc.paths ?? {}))
      for (const op of Object.values(path as Record<string, Operation>))
        for (const response of Object.values(op.responses ?? {}))
          response.headers = {
            ...response.headers,
            "X-Request-Id": COMMON_RESPONSE_HEADERS["X-Request-Id"],
          };
    return finishDocument(doc);
  };
  return servedOncePerServer(build);
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
