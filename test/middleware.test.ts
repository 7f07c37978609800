import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { auth, call, callWith, expectError, issueKey, postJson } from "./helpers";

afterEach(() => vi.restoreAllMocks());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// A D1 bookmark and the tag that shows this API issued it.
const BOOKMARK = /^[0-9a-f]{8}(-[0-9a-f]{8,64}){1,8}\.[A-Za-z0-9_-]{22}$/i;
const ALLOWED = "https://app.example";

const withCors = (path: string, init: RequestInit = {}, origins = ALLOWED) =>
  callWith({ CORS_ORIGINS: origins }, path, init);

const preflight = (origin: string, method = "POST") => ({
  method: "OPTIONS",
  headers: {
    Origin: origin,
    "Access-Control-Request-Method": method,
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key, x-d1-bookmark",
  },
});

const listOf = (header: string | null) =>
  (header ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);

describe("D1 sessions: x-d1-bookmark", () => {
  it("is returned on /v1 responses (list, create, get)", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "Bookmarked", categoryId: 1 }, auth(key));
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: number };
    for (const res of [
      created,
      await call("/v1/pets", { headers: auth(key) }),
      await call(`/v1/pets/${id}`, { headers: auth(key) }),
    ]) {
      expect(res.headers.get("x-d1-bookmark")).toMatch(BOOKMARK);
    }
  });

  it("a bookmark sent back is accepted, and the write it followed is visible", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "ReadMyWrite", categoryId: 2 }, auth(key));
    const { id } = (await created.json()) as { id: number };
    const bookmark = created.headers.get("x-d1-bookmark")!;
    const list = await call("/v1/pets?limit=100", {
      headers: auth(key, { "x-d1-bookmark": bookmark }),
    });
    expect(list.status).toBe(200);
    expect(((await list.json()) as Array<{ id: number }>).map((p) => p.id)).toContain(id);
    expect(list.headers.get("x-d1-bookmark")).toMatch(BOOKMARK);
  });

  it("a malformed bookmark → 400 invalid_request naming the header", async () => {
    const { key } = await issueKey();
    for (const bad of [
      "not-a-bookmark",
      "00000000",
      "zzzzzzzz-00000000",
      "00000000-0000",
      "00000000-00000000; DROP TABLE pets",
      "x".repeat(600),
    ]) {
      const body = await expectError(
        await call("/v1/pets", { headers: auth(key, { "x-d1-bookmark": bad }) }),
        400,
        "invalid_request",
      );
      expect(body.message).toContain("x-d1-bookmark");
    }
  });
});

describe("CORS", () => {
  it("a preflight from an allowed origin → 204 with ACAO, needing no key", async () => {
    const res = await withCors("/v1/pets", preflight(ALLOWED));
    expect(res.status).toBe(204);
    expect(res.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
    expect(listOf(res.headers.get("Access-Control-Allow-Methods"))).toEqual(
      expect.arrayContaining(["get", "post"]),
    );
    expect(listOf(res.headers.get("Access-Control-Allow-Headers"))).toEqual(
      expect.arrayContaining(["authorization", "content-type", "idempotency-key", "x-d1-bookmark"]),
    );
    expect(res.headers.get("WWW-Authenticate")).toBeNull();
  });

  it("several configured origins are each allowed", async () => {
    const origins = "https://a.example, https://b.example";
    for (const origin of ["https://a.example", "https://b.example"]) {
      expect(
        (await withCors("/v1/pets", preflight(origin), origins)).headers.get(
          "Access-Control-Allow-Origin",
        ),
      ).toBe(origin);
    }
  });

  it("a disallowed origin gets no Access-Control-Allow-Origin", async () => {
    const { key } = await issueKey();
    for (const origin of [
      "https://evil.example",
      "https://app.example.evil.example",
      "http://app.example",
      "null",
    ]) {
      expect(
        (await withCors("/v1/pets", preflight(origin))).headers.get("Access-Control-Allow-Origin"),
      ).toBeNull();
      const res = await withCors("/v1/pets", { headers: auth(key, { Origin: origin }) });
      expect(res.status).toBe(200);
      expect(res.headers.get("Access-Control-Allow-Origin")).toBeNull();
    }
  });

  it("exposes the quota, paging, creation, deprecation and tracing headers to the allowed origin, errors included", async () => {
    const { key } = await issueKey();
    const ok = await withCors("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
    const exposed = listOf(ok.headers.get("Access-Control-Expose-Headers"));
    for (const h of [
      "X-RateLimit-Limit",
      "X-RateLimit-Remaining",
      "X-RateLimit-Reset",
      "Retry-After",
      "Link",
      "Location",
      "Deprecation",
      "Sunset",
      "Idempotent-Replayed",
      "X-Request-Id",
      "x-d1-bookmark",
    ]) {
      expect(exposed).toContain(h.toLowerCase());
    }
    // A browser can read the error too.
    const unauthorized = await withCors("/v1/pets", { headers: { Origin: ALLOWED } });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("Access-Control-Allow-Origin")).toBe(ALLOWED);
  });

  it("no CORS headers at all when CORS_ORIGINS is empty (the default)", async () => {
    const { key } = await issueKey();
    expect(env.CORS_ORIGINS ?? "").toBe("");
    for (const origins of ["", "  "]) {
      for (const res of [
        await withCors("/v1/pets", preflight(ALLOWED), origins),
        await withCors("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) }, origins),
      ]) {
        for (const h of [
          "Access-Control-Allow-Origin",
          "Access-Control-Allow-Methods",
          "Access-Control-Expose-Headers",
        ])
          expect(res.headers.get(h), `${JSON.stringify(origins)} ${h}`).toBeNull();
      }
    }
    const viaWorker = await call("/v1/pets", { headers: auth(key, { Origin: ALLOWED }) });
    expect(viaWorker.headers.get("Access-Control-Allow-Origin")).toBeNull();
  });
});

describe("X-Request-Id", () => {
  it("a UUID when absent; a sane client id echoed; an insane one replaced; cf-ray used when present", async () => {
    const { key } = await issueKey();
    const get = (headers: Record<string, string>) =>
      call("/v1/pets", { headers: auth(key, headers) }).then((r) => r.headers.get("X-Request-Id"));
    expect(await get({})).toMatch(UUID);
    expect(await get({ "X-Request-Id": "client-abc_123=" })).toBe("client-abc_123=");
    expect(await get({ "X-Request-Id": "a".repeat(255) })).toBe("a".repeat(255));
    for (const insane of ["has spaces", "a".repeat(256), "semi;colon", "new\\nline"])
      expect(await get({ "X-Request-Id": insane })).toMatch(UUID);
    expect(await get({ "cf-ray": "8f1e2d3c4b5a6978-AMS" })).toBe("8f1e2d3c4b5a6978-AMS");
    expect(await get({ "cf-ray": "8f1e2d3c4b5a6978-AMS", "X-Request-Id": "has spaces" })).toBe(
      "8f1e2d3c4b5a6978-AMS",
    );
    // A CF-Ray that is not a ray id (only possible off Cloudflare) is not echoed.
    expect(await get({ "cf-ray": "<script>", "X-Request-Id": "has spaces" })).toMatch(UUID);
  });
});

describe("Server-Timing", () => {
  const entries = (res: Response) =>
    listOf(res.headers.get("Server-Timing")).map((e) => e.split(";")[0]!.trim());

  it("has auth, quota and db on a list, auth and quota (no db) on a 404", async () => {
    const { key } = await issueKey();
    const list = await call("/v1/pets", { headers: auth(key) });
    expect(list.status).toBe(200);
    expect(entries(list)).toEqual(expect.arrayContaining(["auth", "quota", "db"]));
    const created = await postJson("/v1/pets", { name: "Timed", categoryId: 1 }, auth(key));
    expect(entries(created)).toEqual(expect.arrayContaining(["auth", "quota", "db"]));
    const missing = await call("/v1/nowhere", { headers: auth(key) });
    expect(missing.status).toBe(404);
    expect(entries(missing)).toEqual(expect.arrayContaining(["auth", "quota"]));
    expect(entries(missing)).not.toContain("db");
  });
});

describe("ETag and If-None-Match", () => {
  it("304 for a matching ETag, keeping X-RateLimit-* and still counting", async () => {
    const { key } = await issueKey();
    await postJson("/v1/pets", { name: "Tagged", categoryId: 3 }, auth(key));
    const first = await call("/v1/pets?limit=100", { headers: auth(key) });
    expect(first.status).toBe(200);
    const etag = first.headers.get("ETag")!;
    expect(etag).toMatch(/^(W\/)?"[^"]+"$/);
    const remaining = Number(first.headers.get("X-RateLimit-Remaining"));

    const notModified = await call("/v1/pets?limit=100", {
      headers: auth(key, { "If-None-Match": etag }),
    });
    expect(notModified.status).toBe(304);
    expect(await notModified.text()).toBe("");
    expect(notModified.headers.get("ETag")).toBe(etag);
    expect(notModified.headers.get("X-RateLimit-Limit")).toBe(
      first.headers.get("X-RateLimit-Limit"),
    );
    expect(Number(notModified.headers.get("X-RateLimit-Remaining"))).toBe(remaining - 1);
    expect(notModified.headers.get("X-Request-Id")).toBeTruthy();

    const after = await call("/v1/pets?limit=100", { headers: auth(key) });
    expect(Number(after.headers.get("X-RateLimit-Remaining"))).toBe(remaining - 2);

    // A change to the list changes the ETag: the old one no longer matches.
    await postJson("/v1/pets", { name: "Tagged 2", categoryId: 3 }, auth(key));
    const changed = await call("/v1/pets?limit=100", {
      headers: auth(key, { "If-None-Match": etag }),
    });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("ETag")).not.toBe(etag);
  });

  it("an ETag on getPet 200s too", async () => {
    const { key } = await issueKey();
    const { id } = (await (
      await postJson("/v1/pets", { name: "One", categoryId: 1 }, auth(key))
    ).json()) as { id: number };
    const res = await call(`/v1/pets/${id}`, { headers: auth(key) });
    expect(res.status).toBe(200);
    const etag = res.headers.get("ETag")!;
    expect(etag).toBeTruthy();
    expect(
      (await call(`/v1/pets/${id}`, { headers: auth(key, { "If-None-Match": etag }) })).status,
    ).toBe(304);
  });
});

describe("access log", () => {
  it("exactly one JSON line per request, with the fields and never the key", async () => {
    const k = await issueKey();
    const secretPart = k.key.slice(k.key.lastIndexOf("_") + 1);
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    const cases: Array<[string, () => Promise<Response>, Record<string, unknown>]> = [
      [
        "GET /v1/pets",
        () => call("/v1/pets", { headers: auth(k.key) }),
        {
          method: "GET",
          route: "/v1/pets",
          status: 200,
          keyId: k.id,
          plan: k.plan,
          quota: "allowed",
        },
      ],
      [
        "POST /v1/pets",
        () => postJson("/v1/pets", { name: "Logged", categoryId: 1 }, auth(k.key)),
        {
          method: "POST",
          route: "/v1/pets",
          status: 201,
          keyId: k.id,
          plan: k.plan,
          quota: "allowed",
        },
      ],
      [
        "400",
        () => call("/v1/pets?limit=0", { headers: auth(k.key) }),
        { method: "GET", status: 400, keyId: k.id, plan: k.plan, quota: "allowed" },
      ],
      [
        "401",
        () => call("/v1/pets", { headers: { Authorization: `Bearer ${k.key}x` } }),
        { method: "GET", status: 401 },
      ],
    ];
    for (const [label, send, expected] of cases) {
      log.mockClear();
      const res = await send();
      const lines = log.mock.calls.map((args) => args.map(String).join(" "));
      expect(lines, label).toHaveLength(1);
      const line = lines[0]!;
      expect(line).not.toContain(k.key);
      expect(line).not.toContain(secretPart);
      const entry = JSON.parse(line) as Record<string, unknown>;
      expect(entry).toMatchObject({ requestId: res.headers.get("X-Request-Id"), ...expected });
      expect(entry.status).toBe(res.status);
      expect(typeof entry.route).toBe("string");
      expect(entry.durationMs).toEqual(expect.any(Number));
      expect(entry.durationMs as number).toBeGreaterThanOrEqual(0);
    }
  });

  it("ACCESS_LOG=off writes no line", async () => {
    const k = await issueKey();
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    const res = await callWith({ ACCESS_LOG: "off" }, "/v1/pets", { headers: auth(k.key) });
    expect(res.status).toBe(200);
    expect(log).not.toHaveBeenCalled();
  });
});
