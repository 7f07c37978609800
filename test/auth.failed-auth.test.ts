import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { cacheKey } from "../src/auth/key-cache";
import { getKey } from "../src/db/keys";
import { MINUTE_MS } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import {
  ADMIN,
  auth,
  call,
  callWith,
  expectError,
  issueKey,
  mockClock,
  preparingDb,
  T0,
} from "./helpers";

// The Worker's side of the shield (src/auth/failed-auth.ts); the object's counting is in objects.auth-shield.test.ts.
const time = mockClock(T0);
let seq = 0;
const WRONG_KEY = `pet_test_${"B".repeat(43)}`;

/** An env whose AUTH_SHIELD counts how often it is called. */
function countingShield() {
  const calls: string[] = [];
  const shield = {
    getByName: (name: string) => (calls.push(name), env.AUTH_SHIELD.getByName(name)),
  };
  const send = (path: string, init: RequestInit) => callWith({ AUTH_SHIELD: shield }, path, init);
  return { calls, send };
}

describe("admin token guessing", () => {
  it("30 wrong admin tokens a minute from one client, then 429 for wrong tokens until the minute ends; the right token is never refused", async () => {
    const ip = `198.51.100.${++seq}`;
    const guess = () =>
      call("/admin/v1/keys", {
        headers: { Authorization: "Bearer guess", "CF-Connecting-IP": ip },
      });
    for (let i = 0; i < 30; i++) await expectError(await guess(), 401, "unauthorized");
    const refused = await guess();
    await expectError(refused, 429, "rate_limited");
    expect(Number(refused.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    // The operator at the same address still gets in: a correct token needs no database.
    expect(
      (await call("/admin/v1/keys", { headers: { ...ADMIN, "CF-Connecting-IP": ip } })).status,
    ).toBe(200);
    // ...while wrong tokens from there stay refused, without another call counting them.
    await expectError(await guess(), 429, "rate_limited");
    // The API's own shield for this client is unaffected.
    await expectError(
      await call("/v1/pets", { headers: { "CF-Connecting-IP": ip } }),
      401,
      "unauthorized",
    );
    time.now = T0 + 60_000; // the next minute
    await expectError(await guess(), 401, "unauthorized");
  });
});

describe("clients the shield refused", () => {
  it("are answered in the isolate, without a call to the shield object", async () => {
    const { calls, send } = countingShield();
    const ip = `192.0.2.${++seq}`;
    for (let i = 0; i < 31; i++)
      await send("/v1/pets", { headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": ip } });
    expect(calls).toHaveLength(31);
    const res = await send("/v1/pets", { headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": ip } });
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(res.headers.get("X-RateLimit-Limit")).toBe("30");
    expect(calls).toHaveLength(31);
  });

  it("are answered without looking their keys up in D1, even a valid key this isolate has not cached", async () => {
    const ip = `192.0.2.${++seq}`;
    for (let i = 0; i < 31; i++)
      await call("/v1/pets", { headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": ip } });
    const { key } = await issueKey("pro"); // issued through the admin API: not cached by lookups
    const { db, prepared: keyReads } = preparingDb((sql) => sql.includes("api_keys"));
    const res = await callWith({ DB: db }, "/v1/pets", {
      headers: { ...auth(key), "CF-Connecting-IP": ip },
    });
    await expectError(res, 429, "rate_limited");
    expect(keyReads).toEqual([]);
    // The same key from another client is looked up and works.
    const other = await callWith({ DB: db }, "/v1/pets", {
      headers: { ...auth(key), "CF-Connecting-IP": `192.0.2.${++seq}` },
    });
    expect(other.status).toBe(200);
    expect(keyReads.length).toBeGreaterThan(0);
  });

  it("IPv6 clients are counted by /64: other addresses of the same network share the window", async () => {
    const net = `2001:db8:${(++seq).toString(16)}:1`;
    for (let i = 0; i < 30; i++)
      await call("/v1/pets", {
        headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": `${net}::${(i + 1).toString(16)}` },
      });
    await expectError(
      await call("/v1/pets", {
        headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": `${net}:0:0:0:ffff` },
      }),
      429,
      "rate_limited",
    );
    await expectError(
      await call("/v1/pets", {
        headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": `2001:db8:${seq.toString(16)}:2::1` },
      }),
      401,
      "unauthorized",
    );
  });
});

describe("client addresses", () => {
  it("an IPv4-mapped IPv6 client shares its IPv4 address's window (one HTTP check of the wiring)", async () => {
    for (let i = 0; i < 30; i++)
      await call("/v1/pets", {
        headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": "::ffff:198.51.100.7" },
      });
    await expectError(
      await call("/v1/pets", {
        headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": "198.51.100.7" },
      }),
      429,
      "rate_limited",
    );
  });
});

describe("limiter unreachable", () => {
  it("a revoked key whose record this isolate still caches is refused (re-read from D1), not let through", async () => {
    const k = await issueKey("pro");
    // Used before (so no first-use check of the request reads the key either).
    expect((await call("/v1/pets", { headers: auth(k.key) })).status).toBe(200);
    const stale = (await getKey(env.DB, k.id))!;
    expect(stale.firstUsedAt).not.toBeNull();
    await call(`/admin/v1/keys/${k.id}`, { method: "DELETE", headers: ADMIN });
    cacheKey(await sha256Hex(k.key), { record: stale, secret: "current" }, time.now); // as another isolate would still hold it
    let admitCalls = 0;
    const broken = {
      getByName: () => ({
        admit: () => (admitCalls++, Promise.reject(new Error("limiter down"))),
      }),
    };
    const res = await callWith({ QUOTA: broken }, "/v1/pets", { headers: auth(k.key) });
    expect(res.headers.get("WWW-Authenticate")).toContain('error="invalid_token"');
    await expectError(res, 401, "unauthorized");
    expect(admitCalls).toBe(1);
    // The stale record is forgotten: the next request is refused at authentication.
    const next = await callWith({ QUOTA: broken }, "/v1/pets", { headers: auth(k.key) });
    await expectError(next, 401, "unauthorized");
    expect(admitCalls, "the key's object is not asked again").toBe(1);
  });
});

describe("shield not answering", () => {
  // Every method of the shield's stub rejects with `error`, whatever the client calls.
  const failingShield = (error: Error) => ({
    getByName: () =>
      new Proxy({}, { get: (_t, p) => (p === "then" ? undefined : () => Promise.reject(error)) }),
  });
  const guessWith = (shield: unknown, ip: string) =>
    callWith({ AUTH_SHIELD: shield }, "/v1/pets", {
      headers: { ...auth(WRONG_KEY), "CF-Connecting-IP": ip },
    });

  it("overloaded by the client's own failures: the client is refused until its minute ends", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const overloaded = failingShield(
      Object.assign(new Error("Durable Object is overloaded."), { overloaded: true }),
    );
    const ip = `203.0.113.${++seq}`;
    time.now = T0 + 15_000;
    const res = await guessWith(overloaded, ip);
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("Retry-After")).toBe("45");
    // The headers describe the used-up failure window; so does the refusal the isolate notes.
    const usedUp = {
      "X-RateLimit-Limit": "30",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": String((T0 + MINUTE_MS) / 1000),
    };
    for (const [name, value] of Object.entries(usedUp)) expect(res.headers.get(name)).toBe(value);
    time.now = T0 + 30_000;
    const again = await guessWith(overloaded, ip);
    await expectError(again, 429, "rate_limited");
    expect(again.headers.get("Retry-After")).toBe("30");
    for (const [name, value] of Object.entries(usedUp)) expect(again.headers.get(name)).toBe(value);
  });

  it("unreachable: the isolate counts the client's failures itself, 30 a minute, then 429", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const down = failingShield(new Error("Durable Object unreachable"));
    const ip = `203.0.113.${++seq}`;
    for (let i = 0; i < 30; i++) await expectError(await guessWith(down, ip), 401, "unauthorized");
    await expectError(await guessWith(down, ip), 429, "rate_limited");
    // Another client is unaffected, and the next minute brings a new allowance.
    await expectError(await guessWith(down, `203.0.113.${++seq}`), 401, "unauthorized");
    time.now = T0 + 60_000;
    await expectError(await guessWith(down, ip), 401, "unauthorized");
  });
});
