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
    "D1 bookmark of this request's session; send it back to read your own writes",
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
          description: "The latest x-d1-bookmark you received (read-your-writes)",
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
