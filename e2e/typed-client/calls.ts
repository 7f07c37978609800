// A client generated from the OpenAPI documents by mainstream tools, with nothing written by hand
// but these calls: openapi-typescript's types (packages/client/src/schema.ts for the public
// document, ./admin-schema.ts for the operator one, both written by `npm run openapi -- update`)
// over openapi-fetch. `npm run typecheck` checks every call below against the documents, and the
// lines marked to expect an error prove that a call the document does not allow does not compile;
// e2e/openapi.test.mjs runs callEveryOperation against wrangler dev and checks that it reached
// every operation of both documents with the answer the call expects.
import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "../../packages/client/src/schema.js";
import type { paths as adminPaths } from "./admin-schema.js";

/** "METHOD document /path status" of every answer, as the client saw it (document: public or admin). */
export type CallLog = string[];

function recorder(log: CallLog): Middleware {
  return {
    onResponse({ request, schemaPath, response }) {
      const document = new URL(request.url).pathname.startsWith("/admin/") ? "admin" : "public";
      log.push(`${request.method} ${document} ${schemaPath} ${response.status}`);
    },
  };
}

/** The answer's data, typed by the document; throws with the error body when there is none. */
function present<T>(result: { data?: T; error?: unknown; response: Response }, what: string): T {
  if (result.data === undefined)
    throw new Error(`${what}: ${result.response.status} ${JSON.stringify(result.error)}`);
  return result.data;
}

/**
 * Calls every operation of both documents once (HEAD, GET, POST, PATCH, DELETE, OPTIONS), with
 * types from the documents, and returns what each answered.
 */
export async function callEveryOperation(
  baseUrl: string,
  { apiKey, adminToken }: { apiKey: string; adminToken: string },
): Promise<CallLog> {
  const log: CallLog = [];
  const api = createClient<paths>({
    baseUrl: `${baseUrl}/v1`,
    headers: { Authorization: `Bearer ${apiKey}` },
  });
  api.use(recorder(log));

  const created = await api.POST("/pets", {
    body: { name: "Typed", categoryId: 1, status: "pending" },
    params: { header: { "idempotency-key": `typed-${Date.now()}` } },
  });
  const pet = present(created, "createPet");
  const id: number = pet.id;
  const page = await api.GET("/pets", { params: { query: { limit: 5, status: "pending" } } });
  const names: string[] = present(page, "listPets").map((p) => p.name);
  if (!names.includes("Typed")) throw new Error(`listPets: the new pet is missing (${names})`);
  await api.HEAD("/pets", { params: { query: { limit: 5 } } });
  const got = await api.GET("/pets/{petId}", { params: { path: { petId: id } } });
  if (present(got, "getPet").name !== "Typed") throw new Error("getPet: another pet");
  await api.HEAD("/pets/{petId}", { params: { path: { petId: id } } });
  const usage = await api.GET("/usage");
  const perDay: number = present(usage, "getUsage").limits.perDay;
  if (!(perDay > 0)) throw new Error("getUsage: no day limit");
  await api.HEAD("/usage");
  await api.GET("/openapi.json");
  await api.HEAD("/openapi.json");
  // OPTIONS without a preflight's headers: 405 with Allow (the document's OPTIONS operations).
  await api.OPTIONS("/pets");
  await api.OPTIONS("/pets/{petId}", { params: { path: { petId: String(id) } } });
  await api.OPTIONS("/usage");
  await api.OPTIONS("/openapi.json");

  const admin = createClient<adminPaths>({
    baseUrl: `${baseUrl}/admin/v1`,
    headers: { Authorization: `Bearer ${adminToken}` },
  });
  admin.use(recorder(log));
  await admin.GET("/whoami");
  await admin.HEAD("/whoami");
  const key = present(
    await admin.POST("/keys", {
      body: { name: "typed", plan: "enterprise", limits: { perMinute: 5, perDay: 50 } },
    }),
    "createKey",
  );
  const keyPath = { params: { path: { id: key.id } } };
  await admin.GET("/keys", { params: { query: { plan: "enterprise", limit: 10 } } });
  await admin.HEAD("/keys");
  await admin.GET("/keys/{id}", keyPath);
  await admin.HEAD("/keys/{id}", keyPath);
  await admin.PATCH("/keys/{id}", { ...keyPath, body: { name: "typed again", enabled: true } });
  await admin.POST("/keys/{id}/unban", keyPath);
  await admin.POST("/keys/{id}/roll", { ...keyPath, body: { gracePeriodSeconds: 0 } });
  await admin.GET("/keys/{id}/usage", keyPath);
  await admin.HEAD("/keys/{id}/usage", keyPath);
  const day = new Date().toISOString().slice(0, 10);
  await admin.GET("/usage", { params: { query: { day } } });
  await admin.HEAD("/usage", { params: { query: { day } } });
  await admin.GET("/audit", { params: { query: { keyId: key.id, action: "roll" } } });
  await admin.HEAD("/audit");
  await admin.GET("/openapi.json");
  await admin.HEAD("/openapi.json");
  await admin.DELETE("/keys/{id}", keyPath);
  const endpoint = present(
    await admin.POST("/webhooks", {
      body: { url: "https://hooks.example.com/typed", eventTypes: ["quota.day.warning"] },
    }),
    "createWebhookEndpoint",
  );
  const secret: string = endpoint.secret;
  if (!secret.startsWith("whsec_")) throw new Error("createWebhookEndpoint: no whsec_ secret");
  const endpointPath = { params: { path: { id: endpoint.id } } };
  await admin.GET("/webhooks", { params: { query: { limit: 10 } } });
  await admin.HEAD("/webhooks");
  await admin.GET("/webhooks/{id}", endpointPath);
  await admin.HEAD("/webhooks/{id}", endpointPath);
  await admin.PATCH("/webhooks/{id}", { ...endpointPath, body: { enabled: false } });
  await admin.POST("/webhooks/{id}/roll-secret", {
    ...endpointPath,
    body: { gracePeriodSeconds: 60 },
  });
  const test = present(
    await admin.POST("/webhooks/{id}/test", endpointPath),
    "sendWebhookTestEvent",
  );
  await admin.GET("/webhooks/{id}/deliveries", {
    params: { path: { id: endpoint.id }, query: { limit: 5 } },
  });
  await admin.HEAD("/webhooks/{id}/deliveries", endpointPath);
  const deliveryPath = { params: { path: { id: endpoint.id, deliveryId: test.id } } };
  await admin.POST("/webhooks/{id}/deliveries/{deliveryId}/resend", deliveryPath);
  await admin.OPTIONS("/webhooks/{id}/test", endpointPath);
  await admin.OPTIONS("/webhooks/{id}/deliveries", endpointPath);
  await admin.OPTIONS("/webhooks/{id}/deliveries/{deliveryId}/resend", deliveryPath);
  await admin.DELETE("/webhooks/{id}", endpointPath);
  await admin.OPTIONS("/webhooks");
  await admin.OPTIONS("/webhooks/{id}", endpointPath);
  await admin.OPTIONS("/webhooks/{id}/roll-secret", endpointPath);
  await admin.OPTIONS("/whoami");
  await admin.OPTIONS("/keys");
  await admin.OPTIONS("/keys/{id}", keyPath);
  await admin.OPTIONS("/keys/{id}/unban", keyPath);
  await admin.OPTIONS("/keys/{id}/roll", keyPath);
  await admin.OPTIONS("/keys/{id}/usage", keyPath);
  await admin.OPTIONS("/usage");
  await admin.OPTIONS("/audit");
  await admin.OPTIONS("/openapi.json");
  return log;
}

/**
 * Calls the documents do not allow, which must not compile (never run: `npm run typecheck` is the
 * test). Each line fails to compile without its @ts-expect-error, or the directive itself fails.
 */
export function callsTheDocumentsRefuse(
  api: ReturnType<typeof createClient<paths>>,
  admin: ReturnType<typeof createClient<adminPaths>>,
) {
  // @ts-expect-error limit is an integer, not a string
  api.GET("/pets", { params: { query: { limit: "5" } } });
  // @ts-expect-error status is one of available, pending, sold
  api.GET("/pets", { params: { query: { status: "lost" } } });
  // @ts-expect-error categoryId is required
  api.POST("/pets", { body: { name: "Rex" } });
  // @ts-expect-error petId is required
  api.GET("/pets/{petId}", {});
  // @ts-expect-error the public API has no DELETE
  api.DELETE("/pets/{petId}", { params: { path: { petId: 1 } } });
  // @ts-expect-error a plan-table key has no limits of its own
  admin.POST("/keys", { body: { name: "x", plan: "pro", limits: { perMinute: 1, perDay: 1 } } });
  // @ts-expect-error an enterprise key needs its limits
  admin.POST("/keys", { body: { name: "x", plan: "enterprise" } });
  // @ts-expect-error the id is a string
  admin.GET("/keys/{id}", { params: { path: { id: 7 } } });
}
