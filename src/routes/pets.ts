import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { endTime, startTime } from "hono/timing";
import type { AppEnv } from "../app-env";
import { createPet, getPet, listPets } from "../db/pets";
import { ApiError } from "../errors";
import { jsonBody } from "../middleware/json-body";
import { errorResponses } from "../schemas/common";
import { DEPRECATION_HEADERS, RATE_LIMIT_HEADERS } from "../schemas/headers";
import { ListPetsQuerySchema, NewPetSchema, PetIdParamSchema, PetSchema, PetsSchema } from "../schemas/pets";
import { validationHook } from "../validation";

const security = [{ bearerAuth: [] }];
const json = <T>(schema: T) => ({ "application/json": { schema } });

const listPetsRoute = createRoute({
  method: "get",
  path: "/pets",
  operationId: "listPets",
  summary: "List animals",
  description: "Animals in ascending id order, at most `limit` of them, optionally filtered by status.",
  security,
  request: { query: ListPetsQuerySchema },
  responses: {
    200: { description: "A page of animals", headers: RATE_LIMIT_HEADERS, content: json(PetsSchema) },
    ...errorResponses(400, 401, 405, 429, 500, 503),
  },
});

const createPetRoute = createRoute({
  method: "post",
  path: "/pets",
  operationId: "createPet",
  summary: "Add an animal",
  security,
  middleware: jsonBody,
  request: { body: { required: true, content: json(NewPetSchema) } },
  responses: {
    201: { description: "The created animal", headers: { ...RATE_LIMIT_HEADERS, Location: { description: "/v1/pets/{id}", schema: { type: "string" as const } } }, content: json(PetSchema) },
    ...errorResponses(400, 401, 405, 413, 415, 429, 500, 503),
  },
});

const getPetRoute = createRoute({
  method: "get",
  path: "/pets/{petId}",
  operationId: "getPet",
  summary: "Fetch one animal (deprecated: removed on 5 December 2030; use listPets with a status filter)",
  deprecated: true,
  security,
  request: { params: PetIdParamSchema },
  responses: {
    200: { description: "The animal", headers: { ...RATE_LIMIT_HEADERS, ...DEPRECATION_HEADERS }, content: json(PetSchema) },
    ...errorResponses(400, 401, 404, 405, 410, 429, 500, 503),
  },
});

export const petsApi = new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
  .openapi(listPetsRoute, async (c) => {
    const { limit, status } = c.req.valid("query");
    startTime(c, "db");
    const pets = await listPets(c.get("db"), { limit, status });
    endTime(c, "db");
    return c.json(pets, 200);
  })
  .openapi(createPetRoute, async (c) => {
    startTime(c, "db");
    const pet = await createPet(c.get("db"), c.req.valid("json"));
    endTime(c, "db");
    c.header("Location", `/v1/pets/${pet.id}`);
    return c.json(pet, 201);
  })
  .openapi(getPetRoute, async (c) => {
    const { petId } = c.req.valid("param");
    startTime(c, "db");
    const pet = await getPet(c.get("db"), petId);
    endTime(c, "db");
    if (!pet) throw new ApiError("not_found", `No pet with id ${petId}.`);
    return c.json(pet, 200);
  });

petsApi.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
  type: "http",
  scheme: "bearer",
  description: "An API key issued by the operator: pet_live_… in production, pet_test_… elsewhere.",
});
