import type { Context } from "hono";
import { readBuiltAssetOrThrow } from "../lib/built-assets";
import { etagOfText } from "../lib/etag";
import type { BaseEnv } from "../lib/hono-env";

/**
 * The OpenAPI documents as the Worker serves them. They are generated from the zod schemas at
 * build time (src/openapi-templates.ts, run by the [build] command of wrangler.toml before every
 * `wrangler dev` and deploy), not in the Worker: the generator (openapi-document.ts with
 * zod-to-openapi) runs only for these two routes and weighed about a tenth of the bundle. A
 * document depends on two settings, ENVIRONMENT and PUBLIC_ORIGIN; the build writes each
 * document as a template with stand-ins for them (one template for a relative PUBLIC_ORIGIN and
 * one for an absolute one, whose text differs beyond the origin), and the Worker fills them in.
 * test/openapi-served.test.ts proves the served text equals the generated document's.
 */

export type Audience = "public" | "operator";
/** Whether PUBLIC_ORIGIN is "" (relative links) or an origin. */
export type OriginKind = "relative" | "absolute";
interface DocumentConfig {
  ENVIRONMENT: string;
  PUBLIC_ORIGIN: string;
}

/** Where the templates are among the static assets: under /v1/*, which only the Worker answers. */
export const OPENAPI_TEMPLATES_PATH = "/v1/openapi-templates";
/** The stand-ins a template has for the settings; the generator only ever interpolates them. */
export const TEMPLATE_CONFIG = {
  ENVIRONMENT: "{{ENVIRONMENT}}",
  PUBLIC_ORIGIN: "{{PUBLIC_ORIGIN}}",
} as const satisfies DocumentConfig;

export const templatePath = (audience: Audience, origin: OriginKind) =>
  `${OPENAPI_TEMPLATES_PATH}/${audience}.${origin}.json`;

/** The settings a template of `origin` is generated with. */
export const templateConfigOf = (origin: OriginKind): DocumentConfig => ({
  ENVIRONMENT: TEMPLATE_CONFIG.ENVIRONMENT,
  PUBLIC_ORIGIN: origin === "relative" ? "" : TEMPLATE_CONFIG.PUBLIC_ORIGIN,
});

/** `value` as it appears inside a JSON string. */
const inJsonString = (value: string) => JSON.stringify(value).slice(1, -1);

/** A template's JSON text with this environment's settings in place of the stand-ins. */
export function fillTemplate(template: string, config: DocumentConfig): string {
  let text = template;
  for (const name of ["ENVIRONMENT", "PUBLIC_ORIGIN"] as const) {
    const value = inJsonString(config[name]);
    // A function, so a "$" in the value is never read as a replacement pattern.
    text = text.replaceAll(TEMPLATE_CONFIG[name], () => value);
  }
  return text;
}

type Served = { text: string; etag: string };

/** The template of `audience` for `config`, filled in; throws when the build wrote none. */
async function loadDocumentOrThrow(
  assets: Fetcher,
  audience: Audience,
  config: DocumentConfig,
): Promise<Served> {
  const path = templatePath(audience, config.PUBLIC_ORIGIN ? "absolute" : "relative");
  const text = fillTemplate(await readBuiltAssetOrThrow(assets, path), config);
  return { text, etag: etagOfText(text) };
}

/**
 * The handler of GET /openapi.json for `audience`: the document's JSON text and ETag, read and
 * filled in once per isolate for each environment and public origin (a failed read is retried by
 * the next request).
 */
export function servedDocument(audience: Audience) {
  const cached = new Map<string, Promise<Served>>();
  return async (c: Context<BaseEnv>) => {
    const { ENVIRONMENT, PUBLIC_ORIGIN } = c.var.config;
    const cacheKey = `${ENVIRONMENT} ${PUBLIC_ORIGIN}`;
    let entry = cached.get(cacheKey);
    if (!entry) {
      entry = loadDocumentOrThrow(c.env.ASSETS, audience, { ENVIRONMENT, PUBLIC_ORIGIN });
      cached.set(cacheKey, entry);
      entry.catch(() => cached.delete(cacheKey));
    }
    const { text, etag } = await entry;
    return c.body(text, 200, { "Content-Type": "application/json", ETag: etag });
  };
}
