import { ERROR_CODES } from "../lib/errors";
import { PROBLEM_JSON, PROBLEM_TYPE_PATH } from "../lib/problem-details";

/**
 * What the reference pages (/docs, /admin/docs) add to a finished OpenAPI document: the problem
 * details media type beside every Error body, and a curl and a client sample on every operation.
 */

type Json = Record<string, unknown>;
interface Parameter {
  name?: string;
  in?: string;
  required?: boolean;
  example?: unknown;
  schema?: Json;
}
interface Operation {
  operationId?: string;
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: Json }> };
  security?: unknown[];
  responses?: Record<string, { content?: Record<string, unknown> }>;
  "x-codeSamples"?: Array<{ lang: string; label: string; source: string }>;
}
interface ReferenceDocument {
  info: { description?: string };
  paths?: Record<string, unknown>;
  components?: { schemas?: Record<string, unknown> };
  servers?: Array<{ url: string }>;
}

const ERROR_REF = "#/components/schemas/Error";

/** The RFC 9457 body an error answer has when the request's Accept prefers it. */
const problemSchema = (publicOrigin: string) => ({
  type: "object",
  description:
    "RFC 9457 problem details: the body of an error answer (Content-Type `application/problem+json`) when the request's `Accept` prefers `application/problem+json` to `application/json`. It says what the default Error body says: `detail` is its `message`.",
  required: ["type", "title", "status", "detail", "code"],
  properties: {
    type: {
      type: "string",
      format: "uri-reference",
      description: `The problem type: \`${publicOrigin}${PROBLEM_TYPE_PATH}<code>\`, one per error code (relative while the environment's PUBLIC_ORIGIN is empty)`,
      example: `${publicOrigin}${PROBLEM_TYPE_PATH}rate_limited`,
    },
    title: {
      type: "string",
      description: "A short title of the problem type, the same for every occurrence",
      example: "Rate limited",
    },
    status: { type: "integer", description: "The HTTP status code, repeated", example: 429 },
    detail: {
      type: "string",
      description: "What went wrong this time (the Error body's `message`)",
    },
    code: { type: "string", enum: ERROR_CODES, description: "Machine-readable error code" },
  },
});

const PROBLEM_SENTENCE =
  "Send `Accept: application/problem+json` to get errors as RFC 9457 problem details instead: `{type, title, status, detail, code}` with `Content-Type: application/problem+json` (the `type` URIs, one per code, are listed in the API guide).";

/** `application/problem+json` beside every `application/json` Error body, and its schema. */
export function addProblemDetails(doc: ReferenceDocument, publicOrigin: string): void {
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, Problem: problemSchema(publicOrigin) };
  for (const item of Object.values(doc.paths ?? {}) as Record<string, Operation>[])
    for (const op of Object.values(item))
      for (const response of Object.values(op.responses ?? {})) {
        const json = response.content?.["application/json"] as { schema?: Json } | undefined;
        if (json?.schema?.$ref !== ERROR_REF) continue;
        response.content = {
          ...response.content,
          [PROBLEM_JSON]: { schema: { $ref: "#/components/schemas/Problem" } },
        };
      }
  doc.info.description = doc.info.description?.replace(
    /^(Errors are .*)$/m,
    `$1\n${PROBLEM_SENTENCE}`,
  );
}

type Audience = "public" | "operator";

/** Where the samples send their requests while PUBLIC_ORIGIN is "": `wrangler dev`'s address. */
const LOCAL_ORIGIN = "http://localhost:8787";

/** The environment variable each sample reads its credential from. */
const CREDENTIAL: Record<Audience, string> = {
  public: "ANIMAL_STORE_KEY",
  operator: "ADMIN_TOKEN",
};

/** An example value of `schema` (resolving references into `schemas`), for a request body. */
function exampleOf(schema: Json | undefined, schemas: Record<string, unknown>, depth = 0): unknown {
  if (!schema || depth > 4) return undefined;
  if (typeof schema.$ref === "string")
    return exampleOf(schemas[schema.$ref.split("/").pop()!] as Json, schemas, depth + 1);
  if (schema.example !== undefined) return schema.example;
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  for (const key of ["oneOf", "anyOf", "allOf"])
    if (Array.isArray(schema[key])) return exampleOf(schema[key][0] as Json, schemas, depth + 1);
  if (schema.type === "object" && schema.properties) {
    const required = new Set((schema.required as string[] | undefined) ?? []);
    const entries = Object.entries(schema.properties as Record<string, Json>)
      .filter(([name, property]) => required.has(name) || property.example !== undefined)
      .map(([name, property]) => [name, exampleOf(property, schemas, depth + 1)] as const)
      .filter(([, value]) => value !== undefined);
    return Object.fromEntries(entries);
  }
  if (schema.type === "integer" || schema.type === "number") return schema.minimum ?? 1;
  if (schema.type === "boolean") return true;
  if (schema.type === "string") return "text";
  return undefined;
}

/** `path` with each `{name}` replaced by its parameter's example. */
function examplePath(path: string, parameters: Parameter[]): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const p = parameters.find((x) => x.in === "path" && x.name === name);
    return encodeURIComponent(String(p?.example ?? p?.schema?.example ?? 1));
  });
}

/** A query string that shows the operation's query parameters that have an example. */
function exampleQuery(parameters: Parameter[]): string {
  const pairs = parameters
    .filter((p) => p.in === "query")
    .map((p) => [p.name!, p.example ?? p.schema?.example ?? p.schema?.default])
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`);
  return pairs.length ? `?${pairs.join("&")}` : "";
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

interface Sample {
  method: string;
  url: string;
  path: string;
  body: unknown;
  authenticated: boolean;
  audience: Audience;
}

function curlSample({ method, url, body, authenticated, audience }: Sample): string {
  const lines = [
    method === "HEAD"
      ? `curl -sS --head "${url}"`
      : `curl -sS${method === "GET" ? "" : ` -X ${method}`} "${url}"`,
  ];
  if (authenticated) lines.push(`  -H "Authorization: Bearer $${CREDENTIAL[audience]}"`);
  if (body !== undefined)
    lines.push(`  -H "Content-Type: application/json"`, `  -d ${shellQuote(JSON.stringify(body))}`);
  return lines.join(" \\\n");
}

/** `value` as a JavaScript object literal: `{ name: "Rex", categoryId: 1 }`. */
const jsLiteral = (value: unknown): string =>
  value && typeof value === "object" && !Array.isArray(value)
    ? `{ ${Object.entries(value)
        .map(([k, v]) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}: ${jsLiteral(v)}`)
        .join(", ")} }`
    : JSON.stringify(value);

/** The public API through @animal-store/client: its own methods where it has one. */
function clientSample(operationId: string, sample: Sample, origin: string): string {
  const setup = [
    `import { createAnimalStoreClient } from "@animal-store/client";`,
    "",
    `const store = createAnimalStoreClient({`,
    `  baseUrl: "${origin}",`,
    `  apiKey: process.env.${CREDENTIAL.public}!,`,
    `});`,
  ];
  const calls: Record<string, string[]> = {
    listPets: [
      `const page = await store.listPets({ status: "available", limit: 20 });`,
      `console.log(page.pets, page.nextCursor);`,
      "",
      "// Or every page, following the Link cursors:",
      `for await (const pet of store.listAllPets({ status: "available" })) console.log(pet.name);`,
    ],
    createPet: [
      "// Carries an Idempotency-Key (yours, or one the client makes), so a retry never adds twice.",
      `const pet = await store.createPet(${jsLiteral(sample.body)});`,
    ],
    getPet: ["// Deprecated: prefer store.listPets().", `const pet = await store.getPet(1);`],
    getUsage: [
      "const usage = await store.usage(); // not counted against the quota",
      "console.log(usage.windows);",
    ],
  };
  const path = sample.path;
  const pathParams = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const params = pathParams.length
    ? `, { params: { path: { ${pathParams.map((n) => `${n}: ${n === "petId" ? 1 : '"…"'}`).join(", ")} } } }`
    : "";
  const raw = [
    "// The underlying typed openapi-fetch client, for what has no method of its own:",
    `const { data, response } = await store.api.${sample.method}("${path}"${params});`,
    `console.log(response.status${sample.method === "GET" ? ", data" : ", response.headers"});`,
  ];
  return [...setup, "", ...(calls[operationId] ?? raw)].join("\n");
}

/** The operator API from JavaScript: fetch with the admin token. */
function fetchSample({ method, url, body }: Sample): string {
  const init = [
    ...(method === "GET" ? [] : [`  method: "${method}",`]),
    `  headers: {`,
    `    Authorization: \`Bearer \${process.env.${CREDENTIAL.operator}}\`,`,
    ...(body !== undefined ? [`    "Content-Type": "application/json",`] : []),
    `  },`,
    ...(body !== undefined ? [`  body: JSON.stringify(${jsLiteral(body)}),`] : []),
  ];
  return [
    `const res = await fetch("${url}", {`,
    ...init,
    `});`,
    method === "HEAD" || method === "OPTIONS"
      ? "console.log(res.status, [...res.headers]);"
      : "console.log(res.status, await res.json());",
  ].join("\n");
}

/**
 * `x-codeSamples` on every operation: curl, and the public API's client (@animal-store/client)
 * or, for the operator API, fetch.
 */
export function addCodeSamples(doc: ReferenceDocument, audience: Audience, publicOrigin: string) {
  const origin = publicOrigin || LOCAL_ORIGIN;
  const prefix = audience === "public" ? "/v1" : "/admin/v1";
  const schemas = (doc.components?.schemas ?? {}) as Record<string, unknown>;
  for (const [path, item] of Object.entries(doc.paths ?? {}) as [
    string,
    Record<string, Operation>,
  ][])
    for (const [method, op] of Object.entries(item)) {
      const parameters = op.parameters ?? [];
      const sample: Sample = {
        method: method.toUpperCase(),
        path,
        url: `${origin}${prefix}${examplePath(path, parameters)}${exampleQuery(parameters)}`,
        body: exampleOf(op.requestBody?.content?.["application/json"]?.schema, schemas),
        // An empty requirement list (the document itself) needs no credential.
        authenticated: op.security === undefined || op.security.length > 0,
        audience,
      };
      op["x-codeSamples"] = [
        { lang: "Shell", label: "curl", source: curlSample(sample) },
        audience === "public"
          ? {
              lang: "TypeScript",
              label: "@animal-store/client",
              source: clientSample(op.operationId ?? "", sample, origin),
            }
          : { lang: "JavaScript", label: "fetch", source: fetchSample(sample) },
      ];
    }
}

/** The public document's first section: a key, a first call, paging, a 429. */
const gettingStarted = (origin: string) =>
  [
    "## Getting started",
    "",
    `1. **Get a key.** An operator issues it (\`npm run keys -- create --plan free --name you\`, or the console at \`/admin/keys\`): \`pet_live_…\` in production, \`pet_test_…\` elsewhere. To try requests on this page, paste it in the Bearer Token field.`,
    `2. **Make a first call.** \`curl -sS "${origin}/v1/pets?limit=5" -H "Authorization: Bearer $ANIMAL_STORE_KEY"\`, or with the client: \`createAnimalStoreClient({ baseUrl: "${origin}", apiKey }).listPets({ limit: 5 })\`.`,
    '3. **Page through.** While more pets exist, the answer has `Link: <…&cursor=…>; rel="next"`: follow it until an answer has none (the client\'s `listAllPets()` does). Cursors are opaque; keep `limit` and `status` as the link gives them.',
    "4. **Handle a 429.** Wait `Retry-After` seconds, then retry. `code` says why: `rate_limited` (this minute), `quota_exceeded` (today), `key_banned` (a temporary ban; retrying early never shortens it). `GET /v1/usage` shows your windows without counting. The client retries 429s itself, up to the wait you allow (`maxRetryAfterMs`).",
    "",
  ].join("\n");

/**
 * The reference pages' additions to a finished document of `audience`, for the environment of
 * `config`: problem details on every error answer, code samples on every operation, and (public) a
 * getting-started section.
 */
export function forReference<D>(doc: D, config: { PUBLIC_ORIGIN: string }, audience: Audience): D {
  const reference = doc as unknown as ReferenceDocument;
  addProblemDetails(reference, config.PUBLIC_ORIGIN);
  addCodeSamples(reference, audience, config.PUBLIC_ORIGIN);
  if (audience === "public")
    reference.info.description = `${gettingStarted(config.PUBLIC_ORIGIN || LOCAL_ORIGIN)}\n${reference.info.description ?? ""}`;
  return doc;
}
