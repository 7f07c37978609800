import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { setMetric, wrapTime } from "hono/timing";
import type { ApiKeyVariables } from "../../auth/api-key";
import {
  type CacheScope,
  type PageKey,
  pageSlot,
  storedPet,
  storeFoundPet,
} from "../../db/immutable-reads";
import { createPet, getPet, listPets } from "../../db/pets";
import { runAfterResponse } from "../../lib/after-response";
import { type Config, cursorSecretsAcceptedOrThrow, secretOrThrow } from "../../lib/config";
import { ApiError } from "../../lib/errors";
import type { EnvWith } from "../../lib/hono-env";
import { jsonWithETag } from "../../middleware/conditional";
import type { D1SessionVariables } from "../../middleware/d1-session";
import { jsonBody } from "../../middleware/json-body";
import { validationHook } from "../../middleware/validation-hook";
import { errorResponses, json } from "../../schemas/common";
import { DEPRECATION_HEADERS, RATE_LIMIT_HEADERS } from "../../schemas/headers";
import {
  CreatePetHeadersSchema,
  ListPetsQuerySchema,
  NewPetSchema,
  type Pet,
  PetIdParamSchema,
  PetSchema,
  PetsSchema,
} from "../../schemas/pets";
import { decodeCursorOrThrow, nextPageLink } from "./cursor";
import { createIdempotentlyOrThrow } from "./idempotent-create";

/** What the pets routes rely on: an authenticated key and a D1 session (see app.ts). */
export type PetsEnv = EnvWith<ApiKeyVariables & D1SessionVariables>;

const security = [{ bearerAuth: [] }];

const cacheScopeOf = (config: Config): CacheScope => ({
  environment: config.ENVIRONMENT,
  epoch: config.PAGE_CACHE_EPOCH,
});

// The cache write finishes after the answer; its errors are logged where it is made.
const afterResponseOf = (c: Context) => (work: Promise<unknown>) => runAfterResponse(c, work);

/**
 * A page of pets and whether more exist. A full page (one with a next) never changes, so it comes
 * from the cache when it can (Server-Timing `cache`) and is stored there after a D1 read; a tail
 * page always reads D1 (`db`), because the next pet to be added will join it (and for a while
 * skips the location's cache, where it is not: see pageSlot).
 */
async function readPage(
  c: Context<PetsEnv>,
  scope: CacheScope,
  key: PageKey,
): Promise<{ page: Pet[]; hasNext: boolean }> {
  const slot = pageSlot(scope, key);
  const stored = await slot.stored();
  if (stored) {
    setMetric(c, "cache", stored.tier);
    return { page: stored.value, hasNext: true };
  }
  // One row more than asked tells whether a next page exists without a second query.
  const rows = await wrapTime(
    c,
    "db",
    listPets(c.get("d1").session, {
      limit: key.limit + 1,
      status: key.status,
      afterId: key.afterId,
    }),
  );
  const page = rows.slice(0, key.limit);
  const hasNext = rows.length > key.limit;
  if (hasNext) slot.storeFull(page, afterResponseOf(c));
  else slot.noteTail();
  return { page, hasNext };
}

const listPetsRoute = createRoute({
  method: "get",
  path: "/pets",
  operationId: "listPets",
  tags: ["Pets"],
  summary: "List animals",
  description:
    'Animals in ascending id order, at most `limit` of them, optionally filtered by status. When more exist, `Link: <…>; rel="next"` gives the next page.',
  security,
  request: { query: ListPetsQuerySchema },
  responses: {
    200: {
      description: "A page of animals",
      headers: {
        ...RATE_LIMIT_HEADERS,
        Link: {
          description:
            'rel="next": the next page, when more exist (absolute on the configured public origin, or a relative reference)',
          schema: { type: "string" as const },
        },
      },
      content: json(PetsSchema),
    },
    ...errorResponses(400, 401, 429, 500, 503),
  },
});

const createPetRoute = createRoute({
  method: "post",
  path: "/pets",
  operationId: "createPet",
  tags: ["Pets"],
  summary: "Add an animal",
  description:
    "Adds an animal and answers 201 with it and its `Location`. `status` defaults to `available`; unknown fields are refused. Send an `Idempotency-Key` to make retries safe: the same key and body within 24 h return the first answer again (`Idempotent-Replayed: true`) instead of adding a second animal; the same key with another body is 422. Two `Idempotency-Key` headers are a 400.",
  security,
  middleware: jsonBody,
  request: {
    headers: CreatePetHeadersSchema,
    body: { required: true, content: json(NewPetSchema) },
  },
  responses: {
    201: {
      description: "The created animal (or, for a retried Idempotency-Key, the first answer again)",
      headers: {
        ...RATE_LIMIT_HEADERS,
        Location: { description: "/v1/pets/{id}", schema: { type: "string" as const } },
        "Idempotent-Replayed": {
          description:
            "true when this repeats the answer to an earlier request with the same Idempotency-Key",
          schema: { type: "string" as const },
        },
      },
      content: json(PetSchema),
    },
    ...errorResponses(400, 401, 413, 415, 422, 429, 500, 503),
  },
});

const getPetRoute = createRoute({
  method: "get",
  path: "/pets/{petId}",
  operationId: "getPet",
  tags: ["Pets"],
  description:
    "One animal by id, or 404. Deprecated: its answers carry `Deprecation`, `Sunset` and a `successor-version` link, and from the sunset (2030-12-05T00:00:00Z) on it answers 410 `endpoint_removed`, after authentication and the quota like any other answer (the request is counted). Use listPets with a status filter instead.",
  // Short: it is the operation's label in the reference's sidebar; the deprecation is below.
  summary: "Fetch one animal",
  deprecated: true,
  security,
  request: { params: PetIdParamSchema },
  responses: {
    200: {
      description: "The animal",
      headers: { ...RATE_LIMIT_HEADERS, ...DEPRECATION_HEADERS },
      content: json(PetSchema),
    },
    ...errorResponses(DEPRECATION_HEADERS, 400, 401, 404, 410, 429, 500, 503),
  },
});

export const petsApi = new OpenAPIHono<PetsEnv>({ defaultHook: validationHook })
  .openapi(listPetsRoute, async (c) => {
    const { limit, status, cursor } = c.req.valid("query");
    const config = c.get("config");
    const cursorSecret = () => secretOrThrow(config, "CURSOR_SECRET");
    const from =
      cursor === undefined
        ? null
        : await decodeCursorOrThrow(cursorSecretsAcceptedOrThrow(config), cursor, status);
    if (from?.bookmark) c.get("d1").atLeast(from.bookmark);
    const scope = cacheScopeOf(config);
    const key = { status, limit, afterId: from?.afterId ?? 0 };
    const { page, hasNext } = await readPage(c, scope, key);
    if (hasNext) {
      const lastId = page[page.length - 1]!.id;
      const bookmark = c.get("d1").freshestKnownBookmark();
      const origin = config.PUBLIC_ORIGIN;
      const link = await nextPageLink(
        cursorSecret(),
        origin,
        c.req.path,
        limit,
        status,
        lastId,
        bookmark,
      );
      c.header("Link", link);
    }
    return jsonWithETag(c, page);
  })
  .openapi(createPetRoute, async (c) => {
    const newPet = c.req.valid("json");
    const idempotencyKey = c.req.valid("header")["idempotency-key"];
    const { pet, replayed } =
      idempotencyKey === undefined
        ? { pet: await wrapTime(c, "db", createPet(c.get("d1").session, newPet)), replayed: false }
        : await createIdempotentlyOrThrow(c, idempotencyKey, newPet);
    if (replayed) c.header("Idempotent-Replayed", "true");
    c.header("Location", `/v1/pets/${pet.id}`);
    return c.json(pet, 201);
  })
  .openapi(getPetRoute, async (c) => {
    const { petId } = c.req.valid("param");
    const scope = cacheScopeOf(c.get("config"));
    const stored = await storedPet(scope, petId);
    if (stored) {
      setMetric(c, "cache", stored.tier);
      return jsonWithETag(c, stored.value);
    }
    const pet = await wrapTime(c, "db", getPet(c.get("d1").session, petId));
    if (!pet) throw new ApiError("not_found", `No pet with id ${petId}.`);
    storeFoundPet(scope, pet, afterResponseOf(c));
    return jsonWithETag(c, pet);
  });

petsApi.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
  type: "http",
  scheme: "bearer",
  description: "An API key issued by the operator: pet_live_… in production, pet_test_… elsewhere.",
});
