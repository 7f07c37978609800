// The operator document says only what the operator API does: every operation is walked through
// every status it declares, and each header a response declares must be sent by at least one of
// the answers here with that operation and status.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { outbound } from "../src/routes/webhooks/consumer";
import { ADMIN, brokenDb, call, callWith, issueKey, mockClock, T0 } from "./helpers";

mockClock(T0);

const VIEWER = { Authorization: `Bearer ${env.ADMIN_READ_TOKENS.split(":")[1]}` };
const UNKNOWN_ID = "key_AAAAAAAAAAAAAAAAAAAA";
const UNKNOWN_ENDPOINT_ID = "whe_AAAAAAAAAAAAAAAAAAAA";

/** A delivery (of a test event) to endpoint `id`, for the operations on its deliveries. */
async function newDeliveryId(id: string): Promise<string> {
  const res = await call(`/admin/v1/webhooks/${id}/test`, { method: "POST", headers: ADMIN });
  return ((await res.json()) as { id: string }).id;
}

/** A webhook endpoint's id, for the operations on /webhooks/{id}. */
async function newEndpointId(): Promise<string> {
  const res = await call("/admin/v1/webhooks", {
    method: "POST",
    headers: { ...ADMIN, "Content-Type": "application/json" },
    body: JSON.stringify(BODIES.createWebhookEndpoint),
  });
  return ((await res.json()) as { id: string }).id;
}

type Responses = Record<string, { headers?: Record<string, unknown> }>;
type Operation = { operationId: string; responses: Responses };
type Doc = { paths: Record<string, Record<string, Operation>> };

/** Header names seen per "operationId status". */
const seen = new Map<string, Set<string>>();

function record(operationId: string, res: Response): void {
  const names = seen.get(`${operationId} ${res.status}`) ?? new Set<string>();
  res.headers.forEach((_v, name) => names.add(name.toLowerCase()));
  seen.set(`${operationId} ${res.status}`, names);
}

/** A deployment without a full-access admin token: every operation behind the token is a 500. */
const NO_ADMIN_TOKEN = { ADMIN_TOKEN: "", ADMIN_TOKENS: "" };
/** A setting an operator got wrong (a slash after the origin): every answer is a 500. */
const MISCONFIGURED = { PUBLIC_ORIGIN: "https://api.example.com/" };

/** The query an operation needs to be answered (listUsageOfDay requires its day). */
const REQUIRED_QUERY: Record<string, string> = { listUsageOfDay: "?day=2030-06-10" };

/** A valid body for the operations that take one. */
const BODIES: Record<string, unknown> = {
  createKey: { name: "walked", plan: "pro" },
  updateKey: { name: "walked again" },
  rollKey: { gracePeriodSeconds: 60 },
  createWebhookEndpoint: { url: "https://hooks.example.com/walked", eventTypes: ["key.banned"] },
  updateWebhookEndpoint: { description: "walked" },
  rollWebhookSecret: { gracePeriodSeconds: 60 },
};

async function operations(): Promise<Array<{ method: string; path: string; op: Operation }>> {
  const doc = (await (await call("/admin/v1/openapi.json")).json()) as Doc;
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
}

/** Sends the operation, on key `id`, with `headers`, a body (valid unless given) and a query. */
async function send(
  { method, path, op }: { method: string; path: string; op: Operation },
  {
    id,
    headers = ADMIN,
    body,
    query = "",
    bindings,
  }: {
    id: string;
    headers?: Record<string, string>;
    body?: string;
    query?: string;
    bindings?: Parameters<typeof callWith>[0];
  },
): Promise<Response> {
  const required = REQUIRED_QUERY[op.operationId.replace(/Head$/, "")] ?? "";
  const extra = query && required ? query.replace("?", "&") : query;
  const url = `/admin/v1${path.replace("{id}", id)}${required}${extra}`;
  const hasBody = op.operationId in BODIES;
  const init: RequestInit = {
    method,
    headers: hasBody ? { "Content-Type": "application/json", ...headers } : headers,
    ...(hasBody ? { body: body ?? JSON.stringify(BODIES[op.operationId]) } : { body }),
  };
  const res = bindings ? await callWith(bindings, url, init) : await call(url, init);
  record(op.operationId, res);
  const text = await res.text();
  if (res.status === 500) {
    // The Error body and nothing else: no stack, no setting named (that is in the log).
    const what = `${method} ${url} → 500`;
    if (method !== "HEAD")
      expect(JSON.parse(text), what).toEqual({
        code: "internal_error",
        message: expect.any(String),
        status: 500,
      });
    for (const leak of ["ADMIN_TOKEN", "PUBLIC_ORIGIN", "    at "])
      expect(text, what).not.toContain(leak);
  }
  return res;
}

describe("the operator document's responses and headers", () => {
  it("every operation, walked through its statuses", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    // The test events the walk sends are delivered by the queue consumer, in this isolate: to a
    // receiver here, not to the network.
    vi.spyOn(outbound, "fetch").mockImplementation(async () => new Response(null, { status: 204 }));
    const ops = await operations();
    expect(ops.length).toBeGreaterThanOrEqual(11);
    const revoked = await issueKey("pro");
    await call(`/admin/v1/keys/${revoked.id}`, { method: "DELETE", headers: ADMIN });
    const guesser = { "CF-Connecting-IP": "198.51.100.250" };
    for (let i = 0; i < 30; i++)
      await call("/admin/v1/keys", { headers: { ...guesser, Authorization: "Bearer wrong" } });
    for (const [index, operation] of ops.entries()) {
      // Each operation's guess comes from its own client, so the guesses of all the operations
      // together do not fill one client's failed-authentication window.
      const guess = { "CF-Connecting-IP": `203.0.113.${index + 1}`, Authorization: "Bearer wrong" };
      const onEndpoint = operation.path.startsWith("/webhooks/{id}");
      const id = onEndpoint ? await newEndpointId() : (await issueKey("pro")).id;
      if (operation.path.includes("{deliveryId}"))
        operation.path = operation.path.replace("{deliveryId}", await newDeliveryId(id));
      const write = operation.method !== "GET";
      await send(operation, { id }); // 200 or 201
      if (operation.path.endsWith("/usage") && operation.method !== "OPTIONS")
        await send(operation, {
          id,
          headers: { ...ADMIN, Accept: "text/csv" },
          query: operation.path === "/usage" ? "?limit=1" : "", // a next page: Next-Cursor
        }); // 200 as CSV
      await send(operation, { id, query: "?bogus=1" }); // 400
      await send(operation, { id, headers: {} }); // 401, no credentials
      await send(operation, { id, headers: { Authorization: "Bearer a b" } }); // 400, malformed
      await send(operation, { id, headers: { ...ADMIN, "If-None-Match": "*" } }); // 304 where an ETag is
      await send(operation, { id, headers: guess }); // 401, a guess
      await send(operation, { id, headers: { ...guesser, Authorization: "Bearer wrong" } }); // 429
      if (write) await send(operation, { id, headers: VIEWER }); // 403
      if (operation.path.includes("{id}"))
        await send(operation, { id: onEndpoint ? UNKNOWN_ENDPOINT_ID : UNKNOWN_ID }); // 404
      await send(operation, { id: revoked.id }); // 409 where a revoked key is refused
      if (operation.op.operationId in BODIES) {
        await send(operation, { id, body: JSON.stringify({ name: "x".repeat(20_000) }) }); // 413
        await send(operation, { id, headers: { ...ADMIN, "Content-Type": "text/plain" } }); // 415
      } else if (!["GET", "HEAD", "OPTIONS"].includes(operation.method)) {
        // An operation without a body refuses one rather than ignoring it.
        const json = { ...ADMIN, "Content-Type": "application/json" };
        await send(operation, { id, headers: json, body: "x".repeat(20_000) }); // 413
        await send(operation, {
          id,
          headers: { ...ADMIN, "Content-Type": "text/plain" },
          body: "x",
        }); // 415
      }
      await send(operation, { id, bindings: { DB: brokenDb() } }); // 503
      await send(operation, { id, bindings: NO_ADMIN_TOKEN }); // 500 (the document: 200)
      await send(operation, { id, bindings: MISCONFIGURED }); // 500
    }
  });

  it("every status an operation declares was produced", async () => {
    const notProduced: string[] = [];
    for (const { op } of await operations())
      for (const status of Object.keys(op.responses))
        if (!seen.has(`${op.operationId} ${status}`))
          notProduced.push(`${op.operationId} ${status}`);
    expect(notProduced.join("\n")).toBe("");
  });

  it("every header a response declares was sent by an answer with that operation and status", async () => {
    const missing: string[] = [];
    for (const { op } of await operations())
      for (const [status, response] of Object.entries(op.responses)) {
        const names = seen.get(`${op.operationId} ${status}`);
        if (!names) continue;
        for (const header of Object.keys(response.headers ?? {}))
          if (!names.has(header.toLowerCase()))
            missing.push(`${op.operationId} ${status} ${header}`);
      }
    expect(missing.join("\n")).toBe("");
  });
});
