import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./app-env";

/** OpenAPI 3.1 of the public API, generated once per isolate from the zod schemas. */
export function openApiDocument(api: OpenAPIHono<AppEnv>) {
  let document: unknown;
  return () =>
    (document ??= api.getOpenAPI31Document({
      openapi: "3.1.0",
      info: {
        title: "Animal Store API",
        version: "1.0.0",
        description: "List, add and fetch animals. Every operation needs `Authorization: Bearer <API key>`. Errors are `{code, message, status}`.",
      },
      servers: [{ url: "/v1", description: "This deployment (production: pet_live_ keys; elsewhere pet_test_)" }],
    }));
}
