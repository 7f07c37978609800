import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Env as HonoEnv } from "hono";
import { etagOfText } from "../lib/etag";
import { BOOKMARK_HEADER } from "../middleware/d1-session";
import { RATE_LIMIT_HEADERS } from "../schemas/headers";

type Document = ReturnType<OpenAPIHono["getOpenAPI31Document"]>;
type Operation = {
  parameters?: unknown[];
  responses?: Record<string, { description?: string; headers?: Record<string, unknown> }>;
};

const text = (description: string) => ({ description, schema: { type: "string" } });

/** Headers every /v1 response carries, added here once rather than on every route. */
const COMMON_RESPONSE_HEADERS = {
  "X-Request-Id": text("Your X-Request-Id if it is sane, else Cloudflare's ray id or a UUID"),
  "Server-Timing": text("Time spent per hop: auth, quota, db"),
  [BOOKMARK_HEADER]: text(
    "D1 bookmark of this request's session, signed; send it back unchanged to read your own writes",
  ),
};

/**
 * Middleware-level behaviour that the route definitions do not describe: the D1 bookmark and
 * conditional requests (If-None-Match → 304) on every operation, and the common headers.
 */
function documentMiddleware(doc: Document): Document {
  for (const path of Object.values(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(path as Record<string, Operation>)) {
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
      for (const response of Object.values(op.responses ?? {}))
        response.headers = { ...response.headers, ...COMMON_RESPONSE_HEADERS };
      if (method !== "get") continue;
      op.parameters.push({
        name: "If-None-Match",
        in: "header",
        required: false,
        description: "An ETag from an earlier response",
        schema: { type: "string" },
      });
      const ok = op.responses?.["200"];
      if (ok) ok.headers = { ...ok.headers, ETag: text("Entity tag of the body") };
      op.responses = {
        ...op.responses,
        304: {
          description: "Not modified: If-None-Match matched (still counted against the quota)",
          headers: { ...RATE_LIMIT_HEADERS, ETag: text("Entity tag"), ...COMMON_RESPONSE_HEADERS },
        },
      };
    }
  }
  return doc;
}

/** OpenAPI 3.1 of the public API, as JSON text with its ETag, generated once per isolate from the zod schemas. */
export function openApiDocument<E extends HonoEnv>(api: OpenAPIHono<E>) {
  let cached: { text: string; etag: string } | undefined;
  const build = () =>
    documentMiddleware(
      api.getOpenAPI31Document({
        openapi: "3.1.0",
        info: {
          title: "Animal Store API",
          version: "1.0.0",
          description:
            "List, add and fetch animals. Every operation needs `Authorization: Bearer <API key>`. Errors are `{code, message, status}`.",
        },
        servers: [
          {
            url: "/v1",
            description: "This deployment (production: pet_live_ keys; elsewhere pet_test_)",
          },
        ],
      }),
    );
  return () => {
    if (!cached) {
      const text = JSON.stringify(build());
      cached = { text, etag: etagOfText(text) };
    }
    return cached;
  };
}

/**
 * OpenAPI 3.1 of the operator API, from the same zod schemas, as JSON text with its ETag. It
 * holds no data, so it is served without a token; it is separate from the public document.
 */
export function adminOpenApiDocument<E extends HonoEnv>(api: OpenAPIHono<E>) {
  let cached: { text: string; etag: string } | undefined;
  return () => {
    if (!cached) {
      const doc = api.getOpenAPI31Document({
        openapi: "3.1.0",
        info: {
          title: "Animal Store API — operator (admin) API",
          version: "1.0.0",
          description:
            "Issue and manage API keys, read usage history and the audit trail. Every operation needs `Authorization: Bearer <admin token>` (ADMIN_TOKEN, or a named token of ADMIN_TOKENS); the token's name is the actor in the audit trail. Errors are `{code, message, status}`.",
        },
        servers: [{ url: "/admin/v1", description: "This deployment" }],
      });
      for (const path of Object.values(doc.paths ?? {}))
        for (const op of Object.values(path as Record<string, Operation>))
          for (const response of Object.values(op.responses ?? {}))
            response.headers = {
              ...response.headers,
              "X-Request-Id": COMMON_RESPONSE_HEADERS["X-Request-Id"],
            };
      const text = JSON.stringify(doc);
      cached = { text, etag: etagOfText(text) };
    }
    return cached;
  };
}
