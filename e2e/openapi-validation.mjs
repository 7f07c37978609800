// @ts-check
// Every status and header both OpenAPI documents declare, produced by `wrangler dev` and checked
// by a real OpenAPI validator: Stoplight Prism's (@stoplight/prism-http, the code behind
// `prism proxy`), run in this process on each answer. Not `prism proxy` itself: its forwarder
// parses every answer whose Content-Type is JSON, so a HEAD answer (GET's headers, no body) makes
// it fail the request with "invalid json response body" instead of validating it; the validator
// it would have called is the one used here, on the same requests, and this saves the proxy's
// start-up.
//
// The test (e2e/openapi.test.mjs) fails on an answer the document does not describe (a status it does not list for the
// operation, a body or header that breaks its schema, a header it does not declare) and on a
// status the document lists that no request here produced, but for the few named in NOT_HERE,
// which need a clock or a failing database that `wrangler dev` does not have (the vitest
// contract walks produce those: test/contract.headers.test.ts, test/contract.admin-headers.test.ts).
// The 500s come from a second server, misconfigured on purpose (MISCONFIGURED_VARS).
import http from "node:http";
import https from "node:https";
import { createRequire } from "node:module";

// Prism never goes out: the documents hold only internal references, and any request it tried
// to make through node's http(s) to another host fails the test.
const outside = [];
for (const mod of [http, https]) {
  for (const name of ["request", "get"]) {
    const original = mod[name];
    mod[name] = (...args) => {
      const target = args.find(
        (a) => typeof a === "string" || a instanceof URL || a?.host || a?.hostname,
      );
      const host =
        typeof target === "string" || target instanceof URL
          ? new URL(target).hostname
          : (target?.hostname ?? target?.host);
      if (host !== "127.0.0.1" && host !== "localhost") outside.push(String(host));
      return original.apply(mod, args);
    };
  }
}

const require = createRequire(import.meta.url);
const { getHttpOperationsFromSpec } = require("@stoplight/prism-http");
const route = require("@stoplight/prism-http/dist/router").default;
const { validateOutput } = require("@stoplight/prism-http/dist/validator");

/** The CORS origin the API must be started with (CORS_ORIGINS) for the preflight's 204. */
export const VALIDATION_ORIGIN = "https://app.example.com";
const ORIGIN = VALIDATION_ORIGIN;
const GUESS = `pet_test_${"Q".repeat(43)}`;

/**
 * Headers of HTTP itself, which no operation declares: the body's type and length, the
 * connection's, the date.
 */
const TRANSPORT_HEADERS = new Set([
  "content-type",
  "content-length",
  "date",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-encoding",
]);

/**
 * A setting an operator can get wrong: PUBLIC_ORIGIN must be a bare origin, and this one ends in
 * a slash. A server started with it answers every request 500 `internal_error`, before any work.
 */
export const MISCONFIGURED_VARS = { PUBLIC_ORIGIN: "https://api.example.com/" };

/** Whether the Worker itself answered (its request id), whatever the status: a misconfigured server is up. */
export const workerAnswered = (res) => res.headers.has("X-Request-Id");

/** Seconds left in the minute the failed-guess checks need: they take a few seconds at most. */
const GUESSES_NEED_S = 20;

/** Waits for the next minute when fewer than `seconds` are left in this one. */
async function waitForRoomInMinute(/** @type {number} */ seconds) {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

/** Declared statuses no request here can produce, with what does produce them. */
const NOT_HERE = {
  410: "getPet after its sunset in 2030 (mocked clock: test/contract.headers.test.ts)",
  503: "D1 failing (brokenDb: test/contract.headers.test.ts, test/contract.admin-headers.test.ts)",
};

/**
 * @typedef {{ headers?: Record<string, string>, body?: string, server?: string }} SendOptions
 * A request's headers and body, and the server it goes to (default: the API under test).
 */

/**
 * Sends the requests to the API at `api` (started with CORS_ORIGINS = VALIDATION_ORIGIN), and one
 * per operation to `misconfigured` (started with MISCONFIGURED_VARS), and returns what Prism's
 * validator and the checks here found: answers the documents do not describe, hosts Prism tried
 * to reach, and declared statuses no request produced.
 * @param {{ url: string, adminToken: string, readToken: string }} api
 * @param {{ url: string, adminToken: string }} misconfigured
 */
export async function validateEveryAnswer(api, misconfigured) {
  const { url, adminToken, readToken } = api;
  const problems = [];
  const produced = new Map(); // "doc operationId" → Set of statuses

  /** One document: its operations as Prism reads them, under `prefix`. */
  async function documentAt(name, prefix) {
    const doc = /** @type {object} */ (await (await fetch(`${url}${prefix}/openapi.json`)).json());
    return { name, prefix, operations: await getHttpOperationsFromSpec(doc) };
  }
  const publicDoc = await documentAt("public", "/v1");
  const adminDoc = await documentAt("admin", "/admin/v1");

  /**
   * Sends one request, validates its answer against `doc`, and records what it produced; resolves
   * with its status, headers and body text.
   * @param {Awaited<ReturnType<typeof documentAt>>} doc
   * @param {string} method
   * @param {string} path
   * @param {SendOptions} [options]
   * @returns {Promise<{ status: number, headers: Headers, text: string }>}
   */
  async function send(doc, method, path, { headers = {}, body, server = url } = {}) {
    const res = await fetch(`${server}${doc.prefix}${path}`, { method, headers, body });
    const text = await res.text();
    const responseHeaders = Object.fromEntries(res.headers);
    const isJson = /json/.test(res.headers.get("content-type") ?? "");
    const what = `${doc.name} ${method} ${path} → ${res.status}`;
    const routeAs = (m) =>
      route({
        resources: doc.operations,
        input: { method: m, url: { path: new URL(path, "http://x").pathname } },
      });
    // A method the path does not list is answered as the path's OPTIONS operation says (405):
    // OpenAPI has no operation for "any other method".
    let routed = routeAs(method.toLowerCase());
    if (routed._tag === "Left" && /no method matched/.test(routed.left.message))
      routed = routeAs("options");
    if (routed._tag === "Left") {
      problems.push(`${what}: no operation (${routed.left.message})`);
      return { status: res.status, headers: res.headers, text };
    }
    const operation = routed.right;
    const validated = validateOutput({
      resource: operation,
      element: {
        statusCode: res.status,
        headers: responseHeaders,
        body: text && isJson && method !== "HEAD" ? JSON.parse(text) : text || undefined,
      },
    });
    if (validated._tag === "Left")
      for (const d of validated.left)
        problems.push(`${what}: ${d.path?.join(".") ?? ""} ${d.message}`);
    const declared = operation.responses.find((r) => r.code === String(res.status));
    const names = new Set((declared?.headers ?? []).map((h) => h.name.toLowerCase()));
    for (const name of Object.keys(responseHeaders))
      if (!TRANSPORT_HEADERS.has(name) && !names.has(name) && declared)
        problems.push(`${what}: header ${name} is not declared`);
    const key = `${doc.name} ${operation.iid}`;
    if (!produced.has(key)) produced.set(key, new Set());
    produced.get(key).add(String(res.status));
    return { status: res.status, headers: res.headers, text };
  }

  const issue = async (plan, limits) => {
    const res = await send(adminDoc, "POST", "/keys", {
      headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: `validator ${plan}`, plan, ...(limits ? { limits } : {}) }),
    });
    if (res.status !== 201) throw new Error(`issuing a ${plan} key: ${res.status} ${res.text}`);
    return JSON.parse(res.text);
  };
  const key = await issue("pro");
  const bearer = { Authorization: `Bearer ${key.key}` };
  const limited = await issue("enterprise", { perMinute: 1, perDay: 1000 });
  const limitedBearer = { Authorization: `Bearer ${limited.key}` };
  const json = { ...bearer, "Content-Type": "application/json" };

  // ---------------------------------------------------------------- the public API
  const pub = (
    /** @type {string} */ method,
    /** @type {string} */ path,
    /** @type {SendOptions} */ init,
  ) => send(publicDoc, method, path, init);
  const created = await pub("POST", "/pets", {
    headers: json,
    body: '{"name":"Rex","categoryId":1}',
  });
  const petId = JSON.parse(created.text).id;
  await pub("POST", "/pets", { headers: json, body: '{"name":"Max","categoryId":1}' });
  await pub("POST", "/pets", { headers: json, body: '{"name":"","categoryId":1}' }); // 400
  await pub("POST", "/pets", { body: "{}" }); // 401
  await pub("POST", "/pets", {
    headers: json,
    body: JSON.stringify({ name: "x".repeat(20_000), categoryId: 1 }),
  }); // 413
  await pub("POST", "/pets", { headers: { ...bearer, "Content-Type": "text/plain" }, body: "x" }); // 415
  const idem = { ...json, "Idempotency-Key": `validator-${Date.now()}` };
  await pub("POST", "/pets", { headers: idem, body: '{"name":"Idem","categoryId":1}' });
  await pub("POST", "/pets", { headers: idem, body: '{"name":"Idem","categoryId":1}' }); // replay
  await pub("POST", "/pets", { headers: idem, body: '{"name":"Other","categoryId":1}' }); // 422
  for (const method of ["GET", "HEAD"]) {
    for (const path of [
      "/pets?limit=1",
      "/pets?limit=100",
      `/pets/${petId}`,
      "/usage",
      "/openapi.json",
    ]) {
      const ok = await pub(method, path, { headers: bearer });
      const etag = ok.headers.get("ETag");
      if (etag) await pub(method, path, { headers: { ...bearer, "If-None-Match": etag } }); // 304
      if (path === "/openapi.json") continue;
      await pub(method, path, {}); // 401
      await pub(method, path, { headers: { Authorization: "Bearer a b" } }); // 400
    }
    await pub(method, "/pets?limit=05", { headers: bearer }); // 400
    await pub(method, "/pets/01", { headers: bearer }); // 400
    await pub(method, "/pets/999999999", { headers: bearer }); // 404
  }
  await pub("GET", "/pets", { headers: limitedBearer });
  for (const method of ["GET", "HEAD"]) {
    await pub(method, "/pets", { headers: limitedBearer }); // 429
    await pub(method, `/pets/${petId}`, { headers: limitedBearer }); // 429
  }
  await pub("POST", "/pets", {
    headers: { ...limitedBearer, "Content-Type": "application/json" },
    body: '{"name":"x","categoryId":1}',
  }); // 429
  const reader = await issue("pro");
  for (let i = 0; i < 30; i++)
    await fetch(`${url}/v1/usage`, { headers: { Authorization: `Bearer ${reader.key}` } });
  for (const method of ["GET", "HEAD"])
    await pub(method, "/usage", { headers: { Authorization: `Bearer ${reader.key}` } }); // 429
  for (const path of ["/pets", `/pets/${petId}`, "/usage", "/openapi.json"]) {
    await pub("OPTIONS", path, {
      headers: { Origin: ORIGIN, "Access-Control-Request-Method": "GET" },
    }); // 204
    await pub("OPTIONS", path, {}); // 401
    await pub("OPTIONS", path, { headers: { Authorization: `Bearer ${GUESS}` } }); // 401, counted
    await pub("OPTIONS", path, { headers: { Authorization: "Bearer a b" } }); // 400
    await pub("OPTIONS", path, { headers: bearer }); // 405
    await pub("DELETE", path, { headers: bearer }); // 405: any method a path lacks is its OPTIONS'
  }

  // ---------------------------------------------------------------- the operator API
  const admin = { Authorization: `Bearer ${adminToken}` };
  const viewer = { Authorization: `Bearer ${readToken}` };
  const adminJson = { ...admin, "Content-Type": "application/json" };
  const revoked = await issue("pro");
  await send(adminDoc, "DELETE", `/keys/${revoked.id}`, { headers: admin });
  const BODIES = {
    "POST /keys": { name: "walked", plan: "pro" },
    "PATCH /keys/{id}": { name: "walked again" },
    "POST /keys/{id}/roll": { gracePeriodSeconds: 60 },
    "POST /webhooks": { url: "https://hooks.example.com/walked", eventTypes: ["key.banned"] },
    "PATCH /webhooks/{id}": { description: "walked" },
    "POST /webhooks/{id}/roll-secret": { gracePeriodSeconds: 60 },
  };
  /** A webhook endpoint's id, for the operations on /webhooks/{id}. */
  const newEndpointId = async () => {
    const res = await fetch(`${url}/admin/v1/webhooks`, {
      method: "POST",
      headers: adminJson,
      body: JSON.stringify(BODIES["POST /webhooks"]),
    });
    return /** @type {{ id: string }} */ (await res.json()).id;
  };
  // Today: every key issued here existed on it (a next page), and a day after it is a 400.
  const QUERIES = { "GET /usage": `day=${new Date().toISOString().slice(0, 10)}` };
  const adminOps = adminDoc.operations.map((op) => ({
    method: op.method.toUpperCase(),
    path: op.path,
  }));
  /**
   * @param {{ method: string, path: string }} op
   * @param {string} id
   * @param {{ headers?: Record<string, string>, query?: string, body?: string }} [options]
   */
  const adminSend = (op, id, { headers = admin, query = "", body } = {}) => {
    const ownQuery = QUERIES[`${op.method === "HEAD" ? "GET" : op.method} ${op.path}`];
    const qs = [ownQuery, query].filter(Boolean).join("&");
    const bodyOf = BODIES[`${op.method} ${op.path}`];
    return send(adminDoc, op.method, `${op.path.replace("{id}", id)}${qs ? `?${qs}` : ""}`, {
      headers: bodyOf ? { "Content-Type": "application/json", ...headers } : headers,
      body: bodyOf ? (body ?? JSON.stringify(bodyOf)) : body,
    });
  };
  for (const op of adminOps) {
    // A key of its own: revokeKey's must not be the one rollKey then rolls.
    const onEndpoint = op.path.startsWith("/webhooks/{id}");
    const target = onEndpoint ? { id: await newEndpointId() } : await issue("pro");
    if (op.path.includes("{deliveryId}")) {
      const test = await fetch(`${url}/admin/v1/webhooks/${target.id}/test`, {
        method: "POST",
        headers: admin,
      });
      const delivery = /** @type {{ id: string }} */ (await test.json());
      op.path = op.path.replace("{deliveryId}", delivery.id);
    }
    const isDocument = op.path === "/openapi.json";
    await adminSend(op, target.id); // 200, 201 (405 for OPTIONS)
    if (op.path.endsWith("/usage") && op.method !== "OPTIONS")
      await adminSend(op, target.id, {
        headers: { ...admin, Accept: "text/csv" },
        query: op.path === "/usage" ? "limit=1" : "", // a next page: Next-Cursor
      }); // 200 as CSV
    if (isDocument && op.method !== "OPTIONS") {
      await adminSend(op, target.id, { headers: { "If-None-Match": "*" } }); // 304
      continue;
    }
    await adminSend(op, target.id, { headers: {} }); // 401
    await adminSend(op, target.id, { headers: { Authorization: "Bearer a b" } }); // 400
    await adminSend(op, target.id, { query: "bogus=1" }); // 400
    if (!["GET", "HEAD"].includes(op.method)) await adminSend(op, target.id, { headers: viewer }); // 403
    if (op.path.includes("{id}"))
      await adminSend(op, onEndpoint ? "whe_AAAAAAAAAAAAAAAAAAAA" : "key_AAAAAAAAAAAAAAAAAAAA"); // 404
    await adminSend(op, revoked.id); // 409 where a revoked key is refused
    if (BODIES[`${op.method} ${op.path}`]) {
      await adminSend(op, target.id, {
        headers: adminJson,
        body: JSON.stringify({ name: "x".repeat(20_000) }),
      }); // 413
      await adminSend(op, target.id, { headers: { ...admin, "Content-Type": "text/plain" } }); // 415
    } else if (!["GET", "HEAD", "OPTIONS"].includes(op.method)) {
      // An operation without a body refuses one rather than ignoring it.
      await adminSend(op, target.id, { headers: adminJson, body: "x".repeat(20_000) }); // 413
      await adminSend(op, target.id, {
        headers: { ...admin, "Content-Type": "text/plain" },
        body: "x",
      }); // 415
    }
  }

  // ---------------------------------------------------------------- failed-guess limits (last)
  // The guesses that use up the client's two failed-authentication windows and the requests they
  // then refuse must fall in one minute: all sent at once, with room left in the minute.
  await waitForRoomInMinute(GUESSES_NEED_S);
  const guess = async (/** @type {string} */ path, /** @type {string} */ token) =>
    (await fetch(`${url}${path}`, { headers: { Authorization: `Bearer ${token}` } })).arrayBuffer();
  await Promise.all(
    Array.from({ length: 30 }, () => [
      guess("/v1/pets", GUESS),
      guess("/admin/v1/keys", "wrong"),
    ]).flat(),
  );
  const refusedGuesses = publicDoc.operations
    .filter((op) => op.path !== "/openapi.json" || op.method === "options")
    .map((op) => {
      const body = op.method === "post" ? '{"name":"x","categoryId":1}' : undefined;
      return pub(op.method.toUpperCase(), op.path.replace("{petId}", String(petId)), {
        headers: {
          Authorization: `Bearer ${GUESS}`,
          ...(body ? { "Content-Type": "application/json" } : {}),
        },
        body,
      }); // 429
    });
  for (const op of adminOps)
    if (op.path !== "/openapi.json" || op.method === "OPTIONS")
      refusedGuesses.push(adminSend(op, key.id, { headers: { Authorization: "Bearer wrong" } })); // 429
  await Promise.all(refusedGuesses);

  // ---------------------------------------------------------------- a misconfigured deployment
  // Every operation of both documents once: a 500 with the Error body, nothing more.
  for (const doc of [publicDoc, adminDoc])
    for (const op of doc.operations) {
      const method = op.method.toUpperCase();
      const res = await send(doc, method, op.path.replace(/\{[A-Za-z]+\}/g, "1"), {
        headers: {
          Authorization: `Bearer ${doc === adminDoc ? misconfigured.adminToken : key.key}`,
        },
        server: misconfigured.url,
      });
      const what = `${doc.name} ${method} ${op.path} on the misconfigured server`;
      if (res.status !== 500) problems.push(`${what}: ${res.status}, not 500`);
      else if (
        method !== "HEAD" &&
        !/^\{"code":"internal_error","message":"[^"]+","status":500\}$/.test(res.text)
      )
        problems.push(`${what}: not just the Error body: ${res.text}`);
    }

  const missing = [];
  for (const doc of [publicDoc, adminDoc])
    for (const op of doc.operations)
      for (const { code } of op.responses)
        if (!(code in NOT_HERE) && !produced.get(`${doc.name} ${op.iid}`)?.has(code))
          missing.push(`${doc.name} ${op.iid} ${code}`);
  return { problems: [...new Set(problems)], outside, missing };
}
