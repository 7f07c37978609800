import { evictDurableObject, runInDurableObject } from "cloudflare:test";
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
  petCount,
  T0,
} from "./helpers";

const time = mockClock(T0);

const list = (key: string) => call("/v1/pets", { headers: auth(key) });

/** Puts a record back into this isolate's key cache, as another isolate that has not heard of a change would hold it. */
async function holdStale(key: string, record: KeyRecord): Promise<void> {
  const hash = await sha256Hex(key);
  expect(cachedKey(hash, time.now)).toBeUndefined(); // the admin change dropped it here...
  cacheKey(hash, { record, secret: "current" }, time.now); // ...but another isolate may still have it
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
    // The key's object said this isolate's record was stale: the request read the key again
    // before it was decided, and the isolate now holds the key as it is (the new plan name for
    // the access log and handlers, from this request on).
    expect(cachedKey(await sha256Hex(key), time.now)?.match.record.plan).toBe("pro");
    expect((await list(key)).status).toBe(200);
    expect(cachedKey(await sha256Hex(key), time.now)?.match.record.plan).toBe("pro");
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
    expect(
      cachedKey(await sha256Hex(key), time.now)?.match.record.revokedAt,
      "the limiter's answer made the isolate read the key again",
    ).not.toBeNull();
    // And again, from the record read then.
    await expectError(await list(key), 401, "unauthorized");
    // Revocation does not consume quota.
    const detail = (await (await keyDetail(id)).json()) as { usage: { day: { count: number } } };
    expect(detail.usage.day.count).toBe(1);
  });
});

describe("disabling", () => {
  it("refuses the key with a 401 that says it is disabled, even with a stale cached key record (the object says the record is stale; read again, it says disabled)", async () => {
    const { id, key } = await issueKey("pro");
    expect((await list(key)).status).toBe(200);
    const stale = await recordOf(id);
    expect((await patchKey(id, { enabled: false })).status).toBe(200);
    await holdStale(key, stale);

    const refused = await list(key);
    const body = await expectError(refused, 401, "unauthorized");
    expect(body.message).toMatch(/disabled/);
    // Read again: the isolate holds the key as D1 has it now.
    expect(cachedKey(await sha256Hex(key), time.now)?.match.record.disabledAt).not.toBeNull();
  });
});

describe("limiter unreachable", () => {
  const RATE_HEADERS = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "RateLimit",
    "RateLimit-Policy",
  ];
  /** A QUOTA namespace whose every stub's admit() rejects with `error`; counts getByName calls. */
  function failingWith(error: unknown): { namespace: Env["QUOTA"]; stubs: () => number } {
    let stubs = 0;
    const namespace = {
      getByName: () => {
        stubs++;
        return { admit: () => Promise.reject(error) };
      },
    } as unknown as Env["QUOTA"];
    return { namespace, stubs: () => stubs };
  }
  const marked = (message: string, marks: Record<string, boolean>) =>
    Object.assign(new Error(message), marks);
  const outage = () => failingWith(new Error("Durable Object unreachable")).namespace;
  const listWith = (QUOTA: Env["QUOTA"], key: string) =>
    callWith({ QUOTA }, "/v1/pets", { headers: auth(key) });

  it("fails open within the key's per-minute limit, with the fallback allowance's headers (not the key's windows), with a warning", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 3, perDay: 1000 });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const broken = outage();
    for (let i = 0; i < 3; i++) {
      const res = await listWith(broken, key);
      expect(res.status).toBe(200);
      // The key's windows cannot be known: the headers describe the allowance, named "fallback".
      expect(Object.fromEntries(RATE_HEADERS.map((h) => [h, res.headers.get(h)]))).toEqual({
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": String(2 - i),
        "X-RateLimit-Reset": String((T0 + 60_000) / 1000),
        RateLimit: `"fallback";r=${2 - i};t=60`,
        "RateLimit-Policy": '"fallback";q=3;w=60',
      });
      expect(res.headers.get("Retry-After")).toBeNull();
      await res.arrayBuffer();
    }
    expect(
      warn.mock.calls.some(([line]) => String(line).includes("quota limiter unreachable")),
    ).toBe(true);
    // The allowance of this minute is used up: 503 until the minute ends, not admitted.
    time.now += 20_000;
    const refused = await listWith(broken, key);
    await expectError(refused, 503, "service_unavailable");
    expect(refused.headers.get("Retry-After")).toBe("40");
    // A new minute window brings a new allowance.
    time.now = T0 + 60_000;
    expect((await listWith(broken, key)).status).toBe(200);
  });

  it("never fails open for a key this isolate saw refused in the current window", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 2, perDay: 1000 });
    vi.spyOn(console, "warn").mockImplementation(() => {});
    for (let i = 0; i < 2; i++) expect((await list(key)).status).toBe(200);
    await expectError(await list(key), 429, "rate_limited");
    time.now += 15_000;
    const res = await listWith(outage(), key);
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("Retry-After")).toBe("45");
    // From the next window on, the outage allowance applies again.
    time.now = T0 + 60_000;
    expect((await listWith(outage(), key)).status).toBe(200);
  });

  it("never fails open for a key this isolate saw banned, until the ban ends", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1, perDay: 1000 });
    vi.spyOn(console, "warn").mockImplementation(() => {});
    expect((await list(key)).status).toBe(200);
    for (let i = 0; i < 10; i++) await expectError(await list(key), 429, "rate_limited");
    await expectError(await list(key), 429, "key_banned");
    time.now += 5 * 60_000; // a later minute, still within the 15-minute ban
    const res = await listWith(outage(), key);
    await expectError(res, 429, "key_banned");
    expect(res.headers.get("Retry-After")).toBe(String(10 * 60));
  });

  it("answers 429 with Retry-After, not admitted, when the key's own object is overloaded", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 100, perDay: 1000 });
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const overloaded = failingWith(
      marked("Durable Object is overloaded. Too many requests queued.", { overloaded: true }),
    );
    const before = await petCount();
    const res = await callWith({ QUOTA: overloaded.namespace }, "/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": "application/json" }),
      body: JSON.stringify({ name: "Flood", categoryId: 1 }),
    });
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("Retry-After")).toBe("1");
    expect(await petCount()).toBe(before); // not admitted: the handler never ran
    expect(overloaded.stubs()).toBe(1); // and not retried: that would only add load
  });

  it("retries a .retryable error once with a fresh stub, then decides with the object", async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 5, perDay: 1000 });
    let stubs = 0;
    const flaky = {
      getByName: (name: string) =>
        ++stubs === 1
          ? { admit: () => Promise.reject(marked("Network connection lost.", { retryable: true })) }
          : env.QUOTA.getByName(name),
    } as unknown as Env["QUOTA"];
    const res = await listWith(flaky, key);
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("4"); // decided and counted once
    expect(stubs).toBe(2);
    const detail = (await (await keyDetail(id)).json()) as { usage: { minute: { count: number } } };
    expect(detail.usage.minute.count).toBe(1);
  });

  it("treats a .retryable error that happens again as an outage (bounded fail open)", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1, perDay: 1000 });
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const lost = failingWith(marked("Network connection lost.", { retryable: true }));
    const res = await listWith(lost.namespace, key);
    expect(res.status).toBe(200);
    expect(res.headers.get("RateLimit-Policy")).toBe('"fallback";q=1;w=60');
    expect(lost.stubs()).toBe(2);
    await expectError(await listWith(lost.namespace, key), 503, "service_unavailable");
  });

  /** Creates a pet with `key` through an app whose QUOTA binding is `QUOTA`. */
  const createWith = (QUOTA: Env["QUOTA"], key: string) =>
    callWith({ QUOTA }, "/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": "application/json" }),
      body: JSON.stringify({ name: "Uncounted", categoryId: 1 }),
    });

  it("fails closed on an exception from the object's own code (.remote): 503 with Retry-After, nothing admitted, not retried", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 100, perDay: 1000 });
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const failing = failingWith(marked("TypeError: x is undefined", { remote: true }));
    const before = await petCount();
    time.now = T0 + 20_000;
    for (let i = 0; i < 3; i++) {
      const res = await createWith(failing.namespace, key);
      await expectError(res, 503, "service_unavailable");
      expect(res.headers.get("Retry-After")).toBe("40");
      expect(res.headers.get("RateLimit-Policy")).toBe('"fallback";q=100;w=60');
    }
    expect(await petCount()).toBe(before);
    expect(failing.stubs()).toBe(3); // one call per request: no retry
    const lines = errors.mock.calls.map(([line]) => String(line));
    expect(lines.filter((l) => l.includes("TypeError: x is undefined"))).toHaveLength(1);
  });

  it("fails closed when the key's object cannot open (its stored schema is newer than this code reads): nothing admitted, one error line a minute", async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 100, perDay: 1000 });
    expect((await list(key)).status).toBe(200);
    const stub = env.QUOTA.getByName(id);
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("UPDATE schema_version SET version = version + 1");
    });
    await evictDurableObject(stub);
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const before = await petCount();
    time.now = T0 + 30_000;
    for (let i = 0; i < 4; i++) {
      const res = await createWith(env.QUOTA, key);
      await expectError(res, 503, "service_unavailable");
      expect(res.headers.get("Retry-After")).toBe("30");
    }
    expect(await petCount()).toBe(before);
    const lines = errors.mock.calls.map(([line]) => String(line));
    const cannotOpen = lines.filter((l) => l.includes("object cannot open"));
    expect(cannotOpen).toHaveLength(1);
    expect(cannotOpen[0]).toContain("newer than this code reads");
    expect(cannotOpen[0]).toContain(id);
    time.now = T0 + 60_000; // a new minute: logged again, once
    await expectError(await createWith(env.QUOTA, key), 503, "service_unavailable");
    await expectError(await createWith(env.QUOTA, key), 503, "service_unavailable");
    expect(
      errors.mock.calls.filter(([line]) => String(line).includes("object cannot open")),
    ).toHaveLength(2);
  });

  it("still requires authentication when the limiter is unreachable", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    await expectError(
      await callWith({ QUOTA: outage() }, "/v1/pets", {
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
