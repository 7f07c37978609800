import { adminApi } from "./routes/admin/routes";
import { adminOpenApiDocument, openApiDocument } from "./routes/openapi-document";
import {
  type Audience,
  type OriginKind,
  templateConfigOf,
  templatePath,
} from "./routes/openapi-served";
import { petsApi } from "./routes/pets/routes";
import { ownUsageApi } from "./routes/usage/routes";

/**
 * Build time only: the OpenAPI documents' templates (routes/openapi-served.ts), generated from
 * the route groups' zod schemas. scripts/lib/openapi-templates.mjs bundles this module for Node
 * and writes the templates among the static assets; the Worker never imports it, so the
 * generator stays out of its bundle.
 */
export function openApiTemplates(): { path: string; text: string }[] {
  const documents: Record<Audience, ReturnType<typeof openApiDocument>> = {
    public: openApiDocument(petsApi, ownUsageApi),
    operator: adminOpenApiDocument(adminApi),
  };
  const kinds: OriginKind[] = ["relative", "absolute"];
  return (Object.keys(documents) as Audience[]).flatMap((audience) =>
    kinds.map((kind) => ({
      path: templatePath(audience, kind),
      text: documents[audience](templateConfigOf(kind)).text,
    })),
  );
}
