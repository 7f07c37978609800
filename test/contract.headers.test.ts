// The contract, walked status by status: every /v1 answer (except the public OpenAPI document)
// carries X-RateLimit-* and the IETF pair with values consistent with each other, and the public
// and operator documents say only what the service does: an operation's description names only
// statuses it declares, and every header a response declares is sent by the requests here that
// produce that operation and status.
import { describe, expect, it, vi } from "vitest";
import { AUTH_FAILURES_PER_MINUTE } from "../src/quota/windows";
import { DEPRECATION_VALUES, SUNSET_AT } from "../src/schemas/deprecation";
import {
  ADMIN,
  auth,
  brokenDb,
  call,
  callWith,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);
let seq = 0;
/** A client address of its own for each case, so no case sees another's failure window. */
const newClient = () => ({ "CF-Connecting-IP": `198.18.${Math.floor(++seq / 250)}.${seq % 250}` });

// ------------------------------------------------------------------ the recording
/**
 * The operation a request is for, by method and path, as the document names them: HEAD is the
 * GET's `…Head` operation, and any method a path does not list (OPTIONS included) is that path's
 * OPTIONS operation, the one that declares its 405.
 */
function operationOf(method: string, path: string): string {
  const byPath: Record<string, { options: string } & Partial<Record<string, string>>> = {
    "/v1/pets": { GET: "listPets", POST: "createPet", options: "optionsPets" },
    "/v1/pets/{petId}": { GET: "getPet", options: "optionsPetsPetId" },
    "/v1/usage": { GET: "getUsage", options: "optionsUsage" },
    "/v1/openapi.json": { GET: "getOpenApiDocument", options: "optionsOpenapiJson" },
  };
  const template = /^\/v1\/pets\/[^/]+$/.test(path) ? "/v1/pets/{petId}" : path;
  const ops = byPath[template];
  if (!ops) throw new Error(`no operation for ${method} ${path}`);
  if (method === "HEAD") return `${ops.GET}Head`;
  return ops[method] ?? ops.options;
}

/** Header names seen per "operation status", over every answer this file checked. */
const seen = new Map<string, Set<string>>();

function record(method: string, path: string, res: Response): void {
  const op = operationOf(method, path);
  const names = seen.get(`${op} ${res.status}`) ?? new Set<string>();
  res.headers.forEach((_v, name) => names.add(name.toLowerCase()));
  seen.set(`${op} ${res.status}`, names);
}

/** Sends `path` with `init` (through `bindings` when given) and records it, checking nothing else. */
async function sendUnchecked(
  path: string,
  init: RequestInit = {},
  bindings?: Parameters<typeof callWith>[0],
): Promise<Response> {
  const res = bindings ? await callWith(bindings, path, init) : await call(path, init);
  record((init.method ?? "GET").toUpperCase(), new URL(path, "https://x").pathname, res);
  return res;
}

// ------------------------------------------------------------------ the header checks
interface Windows {
  limit: number;
  remaining: number;
  reset: number;
  policy: Array<{ name: string; q: number; w: number }>;
  rateLimit: Array<{ name: string; r: number; t: number }>;
}

const int = (value: string | null, what: string): number => {
  expect(value, what).toMatch(/^[0-9]+$/);
  return Number(value);
};

/**
 * The rate-limit headers of `res`: present, integers, consistent with each other and with the
 * clock (Reset in the future, Remaining ≤ Limit, the IETF windows named alike, r ≤ q, t ≤ w,
 * Retry-After within Reset).
 */
function rateLimitOf(res: Response, what: string): Windows {
  const h = res.headers;
  const limit = int(h.get("X-RateLimit-Limit"), `${what}: X-RateLimit-Limit`);
  const remaining = int(h.get("X-RateLimit-Remaining"), `${what}: X-RateLimit-Remaining`);
  const reset = int(h.get("X-RateLimit-Reset"), `${what}: X-RateLimit-Reset`);
  expect(limit, `${what}: Limit ≥ 1`).toBeGreaterThanOrEqual(1);
  expect(remaining, `${what}: Remaining ≤ Limit`).toBeLessThanOrEqual(limit);
  expect(reset * 1000, `${what}: Reset in the future`).toBeGreaterThan(time.now);
  const policy = (h.get("RateLimit-Policy") ?? "").split(", ").map((entry) => {
    const m = entry.match(/^"([a-z-]+)";q=([0-9]+);w=([0-9]+)$/);
    expect(m, `${what}: RateLimit-Policy ${entry}`).not.toBeNull();
    return { name: m![1]!, q: Number(m![2]), w: Number(m![3]) };
  });
  const rateLimit = (h.get("RateLimit") ?? "").split(", ").map((entry) => {
    const m = entry.match(/^"([a-z-]+)";r=([0-9]+);t=([0-9]+)$/);
    expect(m, `${what}: RateLimit ${entry}`).not.toBeNull();
    return { name: m![1]!, r: Number(m![2]), t: Number(m![3]) };
  });
  expect(
    rateLimit.map((w) => w.name),
    `${what}: the same windows`,
  ).toEqual(policy.map((w) => w.name));
  for (const [i, w] of rateLimit.entries()) {
    expect(w.r, `${what}: ${w.name} r ≤ q`).toBeLessThanOrEqual(policy[i]!.q);
    expect(w.t, `${what}: ${w.name} t ≤ w`).toBeLessThanOrEqual(policy[i]!.w);
  }
  expect(
    policy.map((w) => w.q),
    `${what}: Limit is one of the windows`,
  ).toContain(limit);
  const retryAfter = h.get("Retry-After");
  if (res.status === 429 || res.status === 503) {
    const seconds = int(retryAfter, `${what}: Retry-After`);
    expect(reset * 1000, `${what}: Reset not before Retry-After`).toBeGreaterThanOrEqual(
      time.now + (seconds - 1) * 1000,
    );
  }
  return { limit, remaining, reset, policy, rateLimit };
}

/** The key's own windows: minute and day at its plan's limits. */
function expectKeyWindows(w: Windows, limits: { perMinute: number; perDay: number }) {
  expect(w.policy).toEqual([
    { name: "minute", q: limits.perMinute, w: 60 },
    { name: "day", q: limits.perDay, w: 86_400 },
  ]);
}

/** The client's failed-authentication window: 30 a minute. */
function expectFailureWindow(w: Windows) {
  expect(w.policy).toEqual([{ name: "minute", q: AUTH_FAILURES_PER_MINUTE, w: 60 }]);
}

/** Sends `path` with `init` (through `bindings` when given), records and checks its headers. */
async function send(
  path: string,
  init: RequestInit = {},
  bindings?: Parameters<typeof callWith>[0],
): Promise<{ res: Response; windows: Windows }> {
  const res = await sendUnchecked(path, init, bindings);
  const method = (init.method ?? "GET").toUpperCase();
  return { res, windows: rateLimitOf(res, `${method} ${path} → ${res.status}`) };
}

/** One request per operation: its method, path and (for createPet) a valid body. */
const OPERATIONS: Array<{ path: string; init: RequestInit }> = [
  { path: "/v1/pets", init: {} },
  {
    path: "/v1/pets",
    init: {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: '{"name":"x","categoryId":1}',
    },
  },
  { path: "/v1/pets/1", init: {} },
  { path: "/v1/usage", init: {} },
];

const withHeaders = (init: RequestInit, headers: Record<string, string>): RequestInit => ({
  ...init,
  headers: { ...(init.headers as Record<string, string>), ...headers },
});

const json = (body: unknown, headers: Record<string, string>) => ({
  method: "POST",
  headers: { "Content-Type": "application/json", ...headers },
  body: typeof body === "string" ? body : JSON.stringify(body),
});

// ------------------------------------------------------------------ the walk
describe("every /v1 answer carries consistent rate-limit headers", () => {
  it("200, 201 (and a replay), 304, 404, 405, 413, 415, 422: the key's windows", async () => {
    const k = await issueKey("pro");
    const headers = auth(k.key, newClient());
    for (let i = 0; i < 3; i++)
      expect((await postJson("/v1/pets", { name: `p${i}`, categoryId: 1 }, headers)).status).toBe(
        201,
      );
    const page = await send("/v1/pets?limit=1", { headers });
    expect(page.res.status).toBe(200);
    expect(page.res.headers.get("Link")).toContain('rel="next"');
    expectKeyWindows(page.windows, k.limits);
    const etag = page.res.headers.get("ETag")!;
    const again = await send("/v1/pets?limit=1", {
      headers: { ...headers, "If-None-Match": etag },
    });
    expect(again.res.status).toBe(304);
    expect(again.windows.remaining).toBe(page.windows.remaining - 1);

    const idem = { ...headers, "Idempotency-Key": `walk-${seq}` };
    const created = await send("/v1/pets", json({ name: "Rex", categoryId: 1 }, idem));
    expect(created.res.status).toBe(201);
    const { id } = (await created.res.json()) as { id: number };
    const replay = await send("/v1/pets", json({ name: "Rex", categoryId: 1 }, idem));
    expect(replay.res.headers.get("Idempotent-Replayed")).toBe("true");
    await expectError(
      (await send("/v1/pets", json({ name: "Max", categoryId: 1 }, idem))).res,
      422,
      "idempotency_key_reused",
    );

    const got = await send(`/v1/pets/${id}`, { headers });
    expect(got.res.status).toBe(200);
    expectKeyWindows(got.windows, k.limits);
    const gotAgain = await send(`/v1/pets/${id}`, {
      headers: { ...headers, "If-None-Match": got.res.headers.get("ETag")! },
    });
    expect(gotAgain.res.status).toBe(304);
    // A 304 keeps the 200's headers: one read from D1 (a tail page, a pet not cached yet) has
    // the bookmark too. If-None-Match: * matches whatever the ETag.
    const tail = await send("/v1/pets?limit=100", {
      headers: { ...headers, "If-None-Match": "*" },
    });
    expect(tail.res.status).toBe(304);
    expect(tail.res.headers.get("x-d1-bookmark")).toBeTruthy();
    const fresh = await send(`/v1/pets/${id - 1}`, {
      headers: { ...headers, "If-None-Match": "*" },
    });
    expect(fresh.res.status).toBe(304);
    expect(fresh.res.headers.get("x-d1-bookmark")).toBeTruthy();
    const missing = await send("/v1/pets/999999999", { headers });
    await expectError(missing.res, 404, "not_found");
    expectKeyWindows(missing.windows, k.limits);
    const usage = await send("/v1/usage", { headers });
    expect(usage.res.status).toBe(200);
    expectKeyWindows(usage.windows, k.limits);

    for (const [method, path] of [
      ["DELETE", "/v1/pets"],
      ["PUT", "/v1/pets/1"],
      ["POST", "/v1/usage"],
    ] as const) {
      const refused = await send(path, { method, headers });
      await expectError(refused.res, 405, "method_not_allowed");
      expectKeyWindows(refused.windows, k.limits);
    }
    const big = await send("/v1/pets", json({ name: "x".repeat(20_000), categoryId: 1 }, headers));
    await expectError(big.res, 413, "payload_too_large");
    expectKeyWindows(big.windows, k.limits);
    const text = await send("/v1/pets", {
      method: "POST",
      headers: { ...headers, "Content-Type": "text/plain" },
      body: "x",
    });
    await expectError(text.res, 415, "unsupported_media_type");
    expectKeyWindows(text.windows, k.limits);
  });

  it("400 × 3 kinds: a bad parameter, a bad body (the key's windows), a malformed Authorization (the client's)", async () => {
    const k = await issueKey("pro");
    const client = newClient();
    for (const path of ["/v1/pets?limit=0", "/v1/pets/0"]) {
      const bad = await send(path, { headers: auth(k.key, client) });
      await expectError(bad.res, 400, "invalid_request");
      expectKeyWindows(bad.windows, k.limits);
    }
    const body = await send("/v1/pets", json({ name: "" }, auth(k.key, client)));
    await expectError(body.res, 400, "invalid_request");
    expectKeyWindows(body.windows, k.limits);
    for (const { path, init } of OPERATIONS) {
      for (const header of ["Bearer", "Bearer a b", `Bearer ${k.key}, Bearer ${k.key}`]) {
        const malformed = await send(path, withHeaders(init, { ...client, Authorization: header }));
        await expectError(malformed.res, 400, "invalid_request");
        expectFailureWindow(malformed.windows);
        expect(malformed.windows.remaining).toBe(AUTH_FAILURES_PER_MINUTE);
      }
    }
  });

  it("401 × 8 kinds carry the client's failure window; only the unknown key is counted", async () => {
    const client = newClient();
    const revoked = await issueKey("pro");
    await call(`/admin/v1/keys/${revoked.id}`, { method: "DELETE", headers: ADMIN });
    const disabled = await issueKey("pro");
    await patchKey(disabled.id, { enabled: false });
    const expiring = await issueKey("pro", undefined, {
      expiresAt: new Date(T0 + 60_000).toISOString(),
    });
    const rolled = await issueKey("pro");
    await postJson(`/admin/v1/keys/${rolled.id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
    const retired = await issueKey("pro");
    for (let i = 0; i < 2; i++)
      await postJson(`/admin/v1/keys/${retired.id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
    time.now = T0 + 90_000; // the expiring key has expired; a new minute window

    const notCounted: Array<[string, Record<string, string>]> = [
      ["no credentials", {}],
      ["Basic", { Authorization: "Basic dXNlcjpwYXNz" }],
      ["revoked", auth(revoked.key)],
      ["disabled", auth(disabled.key)],
      ["expired", auth(expiring.key)],
      ["rolled past its grace period", auth(rolled.key)],
      ["retired by a second roll", auth(retired.key)],
    ];
    for (const { path, init } of OPERATIONS) {
      for (const [label, headers] of notCounted) {
        const { res, windows } = await send(path, withHeaders(init, { ...client, ...headers }));
        await expectError(res, 401, "unauthorized");
        expectFailureWindow(windows);
        // Read, not counted: nothing of the window is used by these.
        expect(windows.remaining, `${label} on ${path}`).toBe(AUTH_FAILURES_PER_MINUTE);
      }
    }
    const guess = await send("/v1/pets", {
      headers: { ...client, ...auth(`pet_test_${"Q".repeat(43)}`) },
    });
    await expectError(guess.res, 401, "unauthorized");
    expectFailureWindow(guess.windows);
    expect(guess.windows.remaining).toBe(AUTH_FAILURES_PER_MINUTE - 1);
    // What the isolate learnt of the window is what the next uncounted answer reads.
    const after = await send("/v1/usage", { headers: client });
    expect(after.windows.remaining).toBe(AUTH_FAILURES_PER_MINUTE - 1);
    expect(after.windows.reset).toBe(guess.windows.reset);
  });

  it("410 after the sunset: after authentication and the quota, counted, with the key's windows", async () => {
    time.now = SUNSET_AT + 3_600_000;
    const k = await issueKey("pro");
    const headers = auth(k.key, newClient());
    const first = await send("/v1/pets/1", { headers });
    await expectError(first.res, 410, "endpoint_removed");
    expect(first.res.headers.get("Sunset")).toBe(DEPRECATION_VALUES.Sunset);
    expectKeyWindows(first.windows, k.limits);
    const second = await send("/v1/pets/1", { headers });
    expect(second.windows.remaining).toBe(first.windows.remaining - 1);
    // Authentication comes first: without a key it is a 401, not a 410.
    const anonymous = await send("/v1/pets/1", { headers: newClient() });
    await expectError(anonymous.res, 401, "unauthorized");
    expect(anonymous.res.headers.get("Deprecation")).toBe(DEPRECATION_VALUES.Deprecation);
  });

  it("429 × 5 kinds: minute, day, ban (the key's windows), failed authentications (the client's), usage reads", async () => {
    const client = newClient();
    const minute = await issueKey("enterprise", { perMinute: 2, perDay: 100 });
    for (let i = 0; i < 2; i++) await call("/v1/pets", { headers: auth(minute.key, client) });
    const limited = await send("/v1/pets", { headers: auth(minute.key, client) });
    await expectError(limited.res, 429, "rate_limited");
    expectKeyWindows(limited.windows, minute.limits);
    expect(limited.windows.remaining).toBe(0);

    const day = await issueKey("enterprise", { perMinute: 100, perDay: 2 });
    for (let i = 0; i < 2; i++) await call("/v1/pets", { headers: auth(day.key, client) });
    const exhausted = await send(
      "/v1/pets",
      json({ name: "x", categoryId: 1 }, auth(day.key, client)),
    );
    await expectError(exhausted.res, 429, "quota_exceeded");
    expectKeyWindows(exhausted.windows, day.limits);

    const banned = await issueKey("enterprise", { perMinute: 1, perDay: 1000 });
    let last: Response | undefined;
    for (let i = 0; i < 12; i++)
      last = await call("/v1/pets", { headers: auth(banned.key, client) });
    await expectError(last!, 429, "key_banned");
    const ban = await send("/v1/pets/1", { headers: auth(banned.key, client) });
    await expectError(ban.res, 429, "key_banned");
    expectKeyWindows(ban.windows, banned.limits);
    // The ban is in X-RateLimit-* and Retry-After; the IETF header shows the real day window.
    expect(ban.windows.remaining).toBe(0);
    expect(ban.windows.rateLimit.find((w) => w.name === "day")!.r).toBe(999);

    const guesser = newClient();
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++)
      await call("/v1/pets", { headers: { ...guesser, ...auth(`pet_test_${"W".repeat(43)}`) } });
    for (const { path, init } of OPERATIONS) {
      const shielded = await send(
        path,
        withHeaders(init, { ...guesser, ...auth(`pet_test_${"W".repeat(43)}`) }),
      );
      await expectError(shielded.res, 429, "rate_limited");
      expectFailureWindow(shielded.windows);
      expect(shielded.windows.remaining).toBe(0);
    }

    const reader = await issueKey("pro");
    let reads: Response | undefined;
    for (let i = 0; i < 31; i++)
      reads = await call("/v1/usage", { headers: auth(reader.key, client) });
    expect(reads!.status).toBe(429);
    const usageLimited = await send("/v1/usage", { headers: auth(reader.key, client) });
    await expectError(usageLimited.res, 429, "rate_limited");
  });

  it("503 when D1 fails while a key is authenticated: the client's window", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const k = await issueKey("pro");
    for (const { path, init } of OPERATIONS) {
      const { res, windows } = await send(
        path,
        withHeaders(init, auth(`pet_test_${"D".repeat(43)}`, newClient())),
        { DB: brokenDb() },
      );
      await expectError(res, 503, "service_unavailable");
      expectFailureWindow(windows);
    }
    // A key already authenticated: D1 failing in the handler keeps the key's windows.
    expect((await call("/v1/pets", { headers: auth(k.key) })).status).toBe(200);
    const failing = await send(
      "/v1/pets?status=sold",
      { headers: auth(k.key) },
      { DB: brokenDb() },
    );
    await expectError(failing.res, 503, "service_unavailable");
    expectKeyWindows(failing.windows, k.limits);
    // Its usage: the key's windows are read before D1 fails for its days, and kept, as above.
    const usage = await send("/v1/usage", { headers: auth(k.key) }, { DB: brokenDb() });
    await expectError(usage.res, 503, "service_unavailable");
    expectKeyWindows(usage.windows, k.limits);
    const create = await send("/v1/pets", json({ name: "x", categoryId: 1 }, auth(k.key)), {
      DB: brokenDb(),
    });
    await expectError(create.res, 503, "service_unavailable");
  });

  it("the limiter unreachable: the fallback allowance is named as such, never the key's windows", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const down = new Error("limiter down");
    const limiter = {
      getByName: () =>
        new Proxy({}, { get: (_t, p) => (p === "then" ? undefined : () => Promise.reject(down)) }),
    };
    const k = await issueKey("enterprise", { perMinute: 2, perDay: 100 });
    const headers = auth(k.key, newClient());
    const policy = [{ name: "fallback", q: 2, w: 60 }];
    const first = await send("/v1/pets", { headers }, { QUOTA: limiter });
    expect(first.res.status).toBe(200);
    expect(first.windows.policy).toEqual(policy);
    expect(first.windows.remaining).toBe(1);
    expect((await send("/v1/pets", { headers }, { QUOTA: limiter })).windows.remaining).toBe(0);
    const used = await send("/v1/pets", { headers }, { QUOTA: limiter });
    await expectError(used.res, 503, "service_unavailable");
    expect(used.windows.policy).toEqual(policy);

    const overloaded = Object.assign(new Error("Durable Object is overloaded."), {
      overloaded: true,
    });
    const busy = {
      getByName: () =>
        new Proxy(
          {},
          {
            get: (_t, p) => (p === "then" ? undefined : () => Promise.reject(overloaded)),
          },
        ),
    };
    const k2 = await issueKey("pro");
    const refused = await send("/v1/pets", { headers: auth(k2.key) }, { QUOTA: busy });
    await expectError(refused.res, 429, "rate_limited");
    expect(refused.windows.policy).toEqual([{ name: "fallback", q: 300, w: 60 }]);
    expect(refused.res.headers.get("Retry-After")).toBe("1");
  });

  it("the public OpenAPI document is outside the quota: no rate-limit headers", async () => {
    const res = await call("/v1/openapi.json", { headers: newClient() });
    expect(res.status).toBe(200);
    for (const name of ["X-RateLimit-Limit", "RateLimit", "RateLimit-Policy"])
      expect(res.headers.get(name)).toBeNull();
  });

  it("the document's other methods need a key: their 401 without one has the client's window", async () => {
    for (const method of ["POST", "PUT", "DELETE", "OPTIONS"]) {
      const { res, windows } = await send("/v1/openapi.json", { method, headers: newClient() });
      await expectError(res, 401, "unauthorized");
      expectFailureWindow(windows);
    }
  });
});

// ------------------------------------------------------------------ 500
/**
 * A deployment an operator got wrong: PUBLIC_ORIGIN must be a bare origin, and this one ends in
 * a slash. Every answer is a 500, given before any work (so without rate-limit headers).
 */
const MISCONFIGURED = { PUBLIC_ORIGIN: "https://api.example.com/" };
/** What D1 throws when a query breaks a constraint validation should have kept: a bug, a 500. */
const CONSTRAINT_BROKEN = "D1_ERROR: CHECK constraint failed: secretThing (SQLITE_CONSTRAINT)";

/** Every request of the public document: each operation once, HEAD and OPTIONS included. */
const EVERY_PUBLIC_REQUEST: Array<{ path: string; init: RequestInit }> = [
  ...OPERATIONS,
  ...["/v1/pets", "/v1/pets/1", "/v1/usage", "/v1/openapi.json"].flatMap((path) => [
    { path, init: { method: "OPTIONS" } },
    ...(path === "/v1/pets" ? [] : [{ path, init: { method: "HEAD" } }]),
  ]),
  { path: "/v1/pets", init: { method: "HEAD" } },
  { path: "/v1/openapi.json", init: {} },
];

/**
 * `res` is a 500 `internal_error` with the Error body and nothing else: no stack, no detail of
 * what failed (that is in the log). A HEAD answer has no body.
 */
async function expectInternalError(res: Response, what: string, method: string): Promise<void> {
  expect(res.status, what).toBe(500);
  const text = await res.text();
  if (method === "HEAD") {
    expect(text, `${what}: HEAD, no body`).toBe("");
    return;
  }
  expect(Object.keys(JSON.parse(text)).sort(), what).toEqual(["code", "message", "status"]);
  await expectError(new Response(text, res), 500, "internal_error");
  for (const leak of ["PUBLIC_ORIGIN", "secretThing", "SQLITE", "D1_ERROR", "    at "])
    expect(text, `${what}: no detail`).not.toContain(leak);
}

describe("500: a misconfigured deployment, a bug", () => {
  it("every operation of the public document answers a misconfigured deployment 500, without rate-limit headers", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    for (const { path, init } of EVERY_PUBLIC_REQUEST) {
      const method = init.method ?? "GET";
      const res = await sendUnchecked(path, withHeaders(init, newClient()), MISCONFIGURED);
      await expectInternalError(res, `${method} ${path}`, method);
      expect(res.headers.get("X-RateLimit-Limit"), `${method} ${path}`).toBeNull();
    }
    // The operator is told which setting, once.
    const told = errors.mock.calls.map((args) => String(args[0]));
    expect(told.filter((line) => line.includes("PUBLIC_ORIGIN"))).toHaveLength(1);
  });

  it("a bug (D1 breaks a constraint) is a 500 with the windows of the key, or of the client when no key could be used", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    for (const { path, init } of EVERY_PUBLIC_REQUEST) {
      const method = init.method ?? "GET";
      const guess = withHeaders(init, auth(`pet_test_${"E".repeat(43)}`, newClient()));
      const failing = { DB: brokenDb({ message: CONSTRAINT_BROKEN }) };
      // The document reads no key and no D1: only its OPTIONS (authenticated, not one of the
      // document's own methods, so not outside the quota) meets the bug.
      if (path === "/v1/openapi.json" && method !== "OPTIONS") continue;
      const { res, windows } = await send(path, guess, failing);
      await expectInternalError(res, `${method} ${path}`, method);
      expectFailureWindow(windows);
    }
    const k = await issueKey("pro");
    expect((await call("/v1/pets", { headers: auth(k.key) })).status).toBe(200);
    // Every operation: the pets operations admitted under the key's quota, the usage read with
    // the key's windows read, before D1 fails in the handler.
    for (const { path, init } of OPERATIONS) {
      const { res, windows } = await send(path, withHeaders(init, auth(k.key)), {
        DB: brokenDb({ message: CONSTRAINT_BROKEN }),
      });
      await expectInternalError(res, `${init.method ?? "GET"} ${path}`, init.method ?? "GET");
      expectKeyWindows(windows, k.limits);
    }
  });

  it("CURSOR_SECRET unset: the next page is a 500, with the key's windows", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const k = await issueKey("pro");
    const headers = auth(k.key, newClient());
    for (let i = 0; i < 2; i++)
      await postJson("/v1/pets", { name: `c${i}`, categoryId: 1 }, headers);
    for (const method of ["GET", "HEAD"]) {
      const { res, windows } = await send(
        "/v1/pets?limit=1",
        { method, headers },
        {
          CURSOR_SECRET: "",
        },
      );
      await expectInternalError(res, `${method} /v1/pets?limit=1`, method);
      expectKeyWindows(windows, k.limits);
    }
  });
});

// ------------------------------------------------------------------ HEAD and OPTIONS
/** Sends `path` as HEAD and expects `status` and no body. */
async function head(
  path: string,
  headers: Record<string, string>,
  status: number,
  bindings?: Parameters<typeof callWith>[0],
): Promise<Response> {
  const res = await sendUnchecked(path, { method: "HEAD", headers }, bindings);
  expect(res.status, `HEAD ${path}`).toBe(status);
  expect(await res.text(), `HEAD ${path}: no body`).toBe("");
  return res;
}

describe("HEAD wherever GET works, and OPTIONS", () => {
  it("HEAD answers every status its GET does, without a body", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const k = await issueKey("pro");
    const headers = auth(k.key, newClient());
    const created = await postJson("/v1/pets", { name: "Head", categoryId: 1 }, headers);
    const { id } = (await created.json()) as { id: number };
    await postJson("/v1/pets", { name: "Head 2", categoryId: 1 }, headers);
    for (const path of ["/v1/pets?limit=1", `/v1/pets/${id}`, "/v1/usage", "/v1/openapi.json"]) {
      const ok = await head(path, headers, 200);
      const etag = ok.headers.get("ETag");
      if (etag) await head(path, { ...headers, "If-None-Match": etag }, 304);
      if (path === "/v1/openapi.json") continue;
      await head(path, { ...newClient(), Authorization: "Bearer a b" }, 400);
      await head(path, newClient(), 401);
      await head(path, auth(`pet_test_${"D".repeat(43)}`, newClient()), 503, { DB: brokenDb() });
    }
    await head("/v1/pets?limit=100", { ...headers, "If-None-Match": "*" }, 304);
    const fresh = await head(`/v1/pets/${id + 1}`, { ...headers, "If-None-Match": "*" }, 304);
    expect(fresh.headers.get("x-d1-bookmark")).toBeTruthy();
    await head("/v1/pets?limit=05", headers, 400);
    await head("/v1/pets/999999999", headers, 404);
    const limited = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    const limitedHeaders = auth(limited.key, newClient());
    await head("/v1/pets", limitedHeaders, 200);
    await head("/v1/pets", limitedHeaders, 429);
    await head(`/v1/pets/${id}`, limitedHeaders, 429);
    const reader = await issueKey("pro");
    for (let i = 0; i < 30; i++) await call("/v1/usage", { headers: auth(reader.key) });
    await head("/v1/usage", auth(reader.key), 429);
    time.now = SUNSET_AT + 1000;
    const late = await issueKey("pro");
    await head(`/v1/pets/${id}`, auth(late.key, newClient()), 410);
  });

  it("GET the document: public, with an ETag, 304 on If-None-Match", async () => {
    const doc = await sendUnchecked("/v1/openapi.json", { headers: newClient() });
    expect(doc.status).toBe(200);
    const etag = doc.headers.get("ETag")!;
    const again = await sendUnchecked("/v1/openapi.json", { headers: { "If-None-Match": etag } });
    expect(again.status).toBe(304);
  });

  it("OPTIONS: a CORS preflight 204 without a key; any other OPTIONS is authenticated, then 405 with Allow", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const origin = "https://app.example.com";
    const k = await issueKey("pro");
    const guesser = newClient();
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++)
      await call("/v1/pets", { headers: { ...guesser, ...auth(`pet_test_${"G".repeat(43)}`) } });
    const allow: Record<string, string> = {
      "/v1/pets": "GET, HEAD, POST",
      "/v1/pets/1": "GET, HEAD",
      "/v1/usage": "GET, HEAD",
      "/v1/openapi.json": "GET, HEAD",
    };
    for (const [path, methods] of Object.entries(allow)) {
      const options = (
        headers: Record<string, string>,
        bindings?: Parameters<typeof callWith>[0],
      ) => sendUnchecked(path, { method: "OPTIONS", headers }, bindings);
      const preflight = await options(
        { Origin: origin, "Access-Control-Request-Method": "GET" },
        { CORS_ORIGINS: origin },
      );
      expect(preflight.status, `preflight ${path}`).toBe(204);
      expect(preflight.headers.get("Access-Control-Allow-Methods")).toBe(methods);
      expect(preflight.headers.get("X-RateLimit-Limit"), "a preflight is not metered").toBeNull();
      await expectError(await options(newClient()), 401, "unauthorized");
      const guess = auth(`pet_test_${"Q".repeat(43)}`, newClient());
      await expectError(await options(guess), 401, "unauthorized");
      await expectError(
        await options({ ...newClient(), Authorization: "Bearer a b" }),
        400,
        "invalid_request",
      );
      await expectError(
        await options({ ...guesser, ...auth(`pet_test_${"G".repeat(43)}`) }),
        429,
        "rate_limited",
      );
      await expectError(
        await options(auth(`pet_test_${"D".repeat(43)}`, newClient()), { DB: brokenDb() }),
        503,
        "service_unavailable",
      );
      const refused = await options(auth(k.key, newClient()));
      await expectError(refused, 405, "method_not_allowed");
      expect(refused.headers.get("Allow")).toBe(methods);
    }
  });
});

// ------------------------------------------------------------------ the documents
type Responses = Record<string, { headers?: Record<string, { $ref?: string }> }>;
type Doc = {
  paths: Record<
    string,
    Record<string, { operationId: string; description?: string; responses: Responses }>
  >;
};

async function documentOf(path: string): Promise<Doc> {
  return (await (await call(path)).json()) as Doc;
}

/** Status codes a text names: three digits from 100 to 599 standing alone. */
const statusesIn = (text: string) =>
  [...text.matchAll(/(?<![\w.^-])([1-5][0-9]{2})(?!\w|\.[0-9])/g)].map((m) => m[1]!);

describe("the documents say only what the service does", () => {
  it.each(["/v1/openapi.json", "/admin/v1/openapi.json"])(
    "%s: a description names only statuses its operation declares",
    async (path) => {
      const doc = await documentOf(path);
      for (const methods of Object.values(doc.paths))
        for (const op of Object.values(methods)) {
          const declared = Object.keys(op.responses);
          for (const status of statusesIn(op.description ?? ""))
            expect(declared, `${op.operationId} mentions ${status}`).toContain(status);
        }
    },
  );

  it("the status check itself finds a status in a description", () => {
    expect(statusesIn("the same key with another body is 422, and while running 409.")).toEqual([
      "422",
      "409",
    ]);
    expect(statusesIn("at most 200 characters, 2^53 − 1, 16 KiB, 2030-12-05, 1.5")).toEqual([
      "200",
    ]);
  });

  it("every header a public response declares is sent by the answers above with that status", async () => {
    const doc = await documentOf("/v1/openapi.json");
    const missing: string[] = [];
    let checked = 0;
    for (const methods of Object.values(doc.paths))
      for (const op of Object.values(methods))
        for (const [status, response] of Object.entries(op.responses)) {
          const names = seen.get(`${op.operationId} ${status}`);
          if (!names) continue;
          for (const header of Object.keys(response.headers ?? {})) {
            checked++;
            if (!names.has(header.toLowerCase()))
              missing.push(`${op.operationId} ${status} ${header}`);
          }
        }
    expect(missing.join("\n")).toBe("");
    expect(checked).toBeGreaterThan(100);
  });

  it("the walks produced every status the public document declares", async () => {
    const doc = await documentOf("/v1/openapi.json");
    const notProduced: string[] = [];
    for (const methods of Object.values(doc.paths))
      for (const op of Object.values(methods))
        for (const status of Object.keys(op.responses))
          if (!seen.has(`${op.operationId} ${status}`))
            notProduced.push(`${op.operationId} ${status}`);
    expect(notProduced.join("\n")).toBe("");
  });
});
