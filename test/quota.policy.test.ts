import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { cachedKey, cacheKey } from "../src/auth/key-cache";
import { getKey, type KeyRecord } from "../src/db/keys";
import { sha256Hex } from "../src/lib/crypto";
import {
  ADMIN,
  auth,
  brokenDb,
  call,
  callWith,
  expectError,
  issueKey,
  keyDetail,
  mockClock,
  patchKey,
  T0,
} from "./helpers";

const time = mockClock(T0);

const list = (key: string) => call("/v1/pets", { headers: auth(key) });

/** Puts a record back into this isolate's key cache, as another isolate that has not heard of a change would hold it. */
async function holdStale(key: string, record: KeyRecord): Promise<void> {
  const hash = await sha256Hex(key);
  expect(cachedKey(hash, time.now)).toBeUndefined(); // the admin change dropped it here...
  cacheKey(hash, record, time.now); // ...but another isolate may still have it
}

async function recordOf(id: string): Promise<KeyRecord> {
  const r = await getKey(env.DB, id);
  expect(r).not.toBeNull();
  return r!;
}

describe("plan change", () => {
  it("applies a new plan's limits from the next request on, even with a stale cached key record", async () => {
    const { id, key } = await issueKey("free");
    const before = await list(key);
    expect(before.headers.get("X-RateLimit-Limit")).toBe("60");
    expect(before.headers.get("RateLimit-Policy")).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
    expect(cachedKey(await sha256Hex(key), time.now)).toBeDefined(); // the Worker cached it in this isolate
    const stale = await recordOf(id);

    const res = await patchKey(id, { plan: "pro" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { plan: string }).plan).toBe("pro");
    await holdStale(key, stale);

    const after = await list(key);
    expect(after.status).toBe(200);
    expect(after.headers.get("X-RateLimit-Limit")).toBe("300");
    expect(after.headers.get("X-RateLimit-Remaining")).toBe("298");
    expect(after.headers.get("RateLimit-Policy")).toBe(
      '"minute";q=300;w=60, "day";q=10000;w=86400',
    );
    // The object's newer policy version made this isolate drop the stale record; the next
    // request reads the key afresh (new plan name for the access log and handlers).
    expect(cachedKey(await sha256Hex(key), time.now)).toBeUndefined();
    expect((await list(key)).status).toBe(200);
    expect(cachedKey(await sha256Hex(key), time.now)?.plan).toBe("pro");
  });

  it("enforces lowered enterprise limits on the next request, keeping the counts", async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 10, perDay: 100 });
    for (let i = 0; i < 4; i++) expect((await list(key)).status).toBe(200);
    const stale = await recordOf(id);

    expect((await patchKey(id, { limits: { perMinute: 3, perDay: 100 } })).status).toBe(200);
    await holdStale(key, stale);

    const res = await list(key);
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("X-RateLimit-Limit")).toBe("3");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(res.headers.get("RateLimit-Policy")).toBe('"minute";q=3;w=60, "day";q=100;w=86400');
  });

  it("raises limits on the next request", async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 2, perDay: 100 });
    for (let i = 0; i < 2; i++) expect((await list(key)).status).toBe(200);
    await expectError(await list(key), 429, "rate_limited");
    expect((await patchKey(id, { plan: "business" })).status).toBe(200);
    const res = await list(key);
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Limit")).toBe("1000");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("997");
  });
});

describe("revocation", () => {
  it("refuses the key from its next request on, even with a stale cached key record", async () => {
    const { id, key } = await issueKey("pro");
    expect((await list(key)).status).toBe(200);
    const stale = await recordOf(id);

    const res = await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe("revoked");
    await holdStale(key, stale);

    const refused = await list(key);
    await expectError(refused, 401, "unauthorized");
    expect(refused.headers.get("WWW-Authenticate")).toContain('error="invalid_token"');
    // And again, time.now from D1 since the limiter's answer dropped the cached record.
    await expectError(await list(key), 401, "unauthorized");
    // Revocation does not consume quota.
    const detail = (await (await keyDetail(id)).json()) as { usage: { day: { count: number } } };
    expect(detail.usage.day.count).toBe(1);
  });
});

describe("limiter unreachable", () => {
  const brokenNamespace = {
    getByName: () => ({
      admit: () => Promise.reject(new Error("Durable Object unreachable")),
    }),
  } as unknown as Env["QUOTA"];

  it("fails open: the request is served without rate limit headers and a warning is logged", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1, perDay: 1 });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    for (let i = 0; i < 3; i++) {
      const res = await callWith({ QUOTA: brokenNamespace }, "/v1/pets", { headers: auth(key) });
      expect(res.status).toBe(200);
      for (const h of [
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "RateLimit",
        "RateLimit-Policy",
        "Retry-After",
      ]) {
        expect(res.headers.get(h), h).toBeNull();
      }
      await res.arrayBuffer();
    }
    expect(warn).toHaveBeenCalled();
    expect(
      warn.mock.calls.some(([line]) => String(line).includes("quota limiter unreachable")),
    ).toBe(true);
  });

  it("still requires authentication when the limiter is unreachable", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    await expectError(
      await callWith({ QUOTA: brokenNamespace }, "/v1/pets", {
        headers: { "CF-Connecting-IP": "192.0.2.44" },
      }),
      401,
      "unauthorized",
    );
  });
});

describe("5xx after the limiter was reached", () => {
  it("carries the key's rate limit headers on a 503 from a failing database", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 9, perDay: 90 });
    expect((await list(key)).status).toBe(200); // warms this isolate's key cache, so auth needs no D1
    vi.spyOn(console, "error").mockImplementation(() => {});

    const res = await callWith({ DB: brokenDb() }, "/v1/pets", { headers: auth(key) });
    await expectError(res, 503, "service_unavailable");
    expect(res.headers.get("X-RateLimit-Limit")).toBe("9");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("7");
    expect(res.headers.get("X-RateLimit-Reset")).toBe(String((T0 + 60_000) / 1000));
    expect(res.headers.get("RateLimit-Policy")).toBe('"minute";q=9;w=60, "day";q=90;w=86400');
  });
});
