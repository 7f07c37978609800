// Durability: a quota object evicted mid-run keeps its counts and bans; D1 failing mid-run gives
// 503 with Retry-After and writes nothing.
import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { auth, brokenDb, call, callWith, expect503, fixClock, issueKey, petCount } from "./helpers";

const list = (key: string) => call("/v1/pets?limit=1", { headers: auth(key) });
const remainingOf = (res: Response) => Number(res.headers.get("X-RateLimit-Remaining"));
const dayRemainingOf = (res: Response) =>
  Number(/"day";r=(\d+)/.exec(res.headers.get("RateLimit") ?? "")?.[1]);

describe("Durable Object eviction mid-run", () => {
  it("X-RateLimit-Remaining continues where it was after the key's object is evicted", async () => {
    const time = fixClock(Date.UTC(2027, 2, 1, 9, 0, 10));
    const { key, id } = await issueKey("enterprise", { perMinute: 50, perDay: 1_000 });

    const before: number[] = [];
    for (let i = 0; i < 10; i++) before.push(remainingOf(await list(key)));
    expect(before).toEqual([49, 48, 47, 46, 45, 44, 43, 42, 41, 40]);

    await evictDurableObject(env.QUOTA.getByName(id));
    const after: number[] = [];
    for (let i = 0; i < 5; i++) after.push(remainingOf(await list(key)));
    expect(after).toEqual([39, 38, 37, 36, 35]);

    // The day window survives too, across an eviction and a minute rollover.
    await evictDurableObject(env.QUOTA.getByName(id));
    time.now += 2 * MINUTE_MS;
    const res = await list(key);
    expect(remainingOf(res)).toBe(49);
    expect(dayRemainingOf(res)).toBe(1_000 - 16);
    const usage = await env.QUOTA.getByName(id).usage();
    expect([usage.minute.count, usage.day.count]).toEqual([1, 16]);
  });

  it("an eviction racing a burst admits exactly the quota in total", async () => {
    fixClock(Date.UTC(2027, 2, 1, 10, 0, 10));
    const { key, id } = await issueKey("enterprise", { perMinute: 30, perDay: 1_000 });
    expect((await list(key)).status).toBe(200); // the object is running now

    const burst = () => Array.from({ length: 40 }, () => list(key));
    const [first, , second] = await Promise.all([
      Promise.all(burst()),
      evictDurableObject(env.QUOTA.getByName(id)),
      Promise.all(burst()),
    ]);
    const admitted = [...first, ...second].filter((r) => r.status === 200);
    expect(admitted.length).toBe(29);
    expect([...first, ...second].every((r) => r.status === 200 || r.status === 429)).toBe(true);
    expect((await env.QUOTA.getByName(id).usage()).minute.count).toBe(30);
  });

  it("a ban survives eviction", async () => {
    fixClock(Date.UTC(2027, 2, 1, 11, 0, 10));
    const { key, id } = await issueKey("enterprise", { perMinute: 5, perDay: 1_000 });
    const codes: string[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await list(key);
      codes.push(res.status === 200 ? "ok" : ((await res.json()) as { code: string }).code);
    }
    expect(codes).toEqual([
      ...Array(5).fill("ok"),
      ...Array(10).fill("rate_limited"),
      "key_banned",
    ]);

    await evictDurableObject(env.QUOTA.getByName(id));
    const res = await list(key);
    expect(res.status).toBe(429);
    expect(((await res.json()) as { code: string }).code).toBe("key_banned");
    expect(Number(res.headers.get("Retry-After"))).toBeGreaterThan(60);
  });
});

describe("idempotency records across eviction", () => {
  it("a retry after the key's object is evicted replays the first answer and creates nothing", async () => {
    const { key, id } = await issueKey("enterprise", { perMinute: 1_000, perDay: 10_000 });
    const send = () =>
      call("/v1/pets", {
        method: "POST",
        headers: auth(key, { "Content-Type": "application/json", "Idempotency-Key": "evict-1" }),
        body: '{"name":"Once","categoryId":2}',
      });
    const first = await send();
    expect(first.status).toBe(201);
    const pet = await first.json();
    const before = await petCount();

    await evictDurableObject(env.QUOTA.getByName(id));
    const retry = await send();
    expect(retry.status).toBe(201);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await retry.json()).toEqual(pet);
    expect(await petCount()).toBe(before);
  });
});

// ------------------------------------------------------------------ D1 faults
/** The app with `db` as its D1 binding, waiting for the request's waitUntil() work. */
const viaApp = (DB: D1Database, path: string, init: RequestInit = {}) =>
  callWith({ DB }, path, init, { wait: true });

const isWrite = (sql: string) => /^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i.test(sql);
const createInit = (key: string, name: string): RequestInit => ({
  method: "POST",
  headers: auth(key, { "Content-Type": "application/json" }),
  body: JSON.stringify({ name, categoryId: 5 }),
});
const snapshot = async () => ({
  rows: (await env.DB.prepare("SELECT id, name, category_id, status FROM pets ORDER BY id").all())
    .results,
  seq:
    (
      await env.DB.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'pets'").first<{
        seq: number;
      }>()
    )?.seq ?? 0,
});

describe("D1 failing mid-run", () => {
  it("creates fail with 503 + Retry-After while writes fail, nothing is written, and creates resume after", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 100_000, perDay: 1_000_000 });
    for (const name of ["before-1", "before-2"])
      expect((await viaApp(env.DB, "/v1/pets", createInit(key, name))).status).toBe(201);
    const before = await snapshot();

    const down = brokenDb({ fails: isWrite });
    await expect503(await viaApp(down, "/v1/pets", createInit(key, "during")), "one create");
    const parallel = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        viaApp(down, "/v1/pets", createInit(key, `during-${i}`)),
      ),
    );
    for (const res of parallel) await expect503(res, "parallel create");
    // Reads still work meanwhile.
    expect((await viaApp(down, "/v1/pets?limit=5", { headers: auth(key) })).status).toBe(200);
    expect(await snapshot()).toEqual(before);

    // An idempotent create that failed leaves no claim behind: its retry after recovery creates once.
    const idem = (db: D1Database) =>
      viaApp(db, "/v1/pets", {
        ...createInit(key, "after"),
        headers: auth(key, { "Content-Type": "application/json", "Idempotency-Key": "d1-down-1" }),
      });
    await expect503(await idem(down), "idempotent create");
    expect(await snapshot()).toEqual(before);

    const res = await idem(env.DB);
    expect(res.status).toBe(201);
    expect(res.headers.get("Idempotent-Replayed")).toBeNull();
    expect(((await res.json()) as { id: number }).id).toBe(before.seq + 1);
    expect((await snapshot()).rows.length).toBe(before.rows.length + 1);
  });

  for (const mode of ["reject", "prepare-throws", "session-throws"] as const) {
    it(`with D1 entirely down (${mode}), every route answers 503 + Retry-After and nothing is written`, async () => {
      const { key } = await issueKey("enterprise", { perMinute: 100_000, perDay: 1_000_000 });
      const created = await viaApp(env.DB, "/v1/pets", createInit(key, `warm-${mode}`)); // also caches the key record
      const { id } = (await created.json()) as { id: number };
      const before = await snapshot();

      const down = brokenDb({ mode });
      const responses = {
        "POST /v1/pets": await viaApp(down, "/v1/pets", createInit(key, `down-${mode}`)),
        "GET /v1/pets": await viaApp(down, "/v1/pets?limit=10", { headers: auth(key) }),
        "GET /v1/pets/{id}": await viaApp(down, `/v1/pets/${id}`, { headers: auth(key) }),
      };
      // All statuses first, so one failure shows every route's answer.
      const statuses = Object.fromEntries(
        Object.entries(responses).map(([route, res]) => [route, res.status]),
      );
      expect(statuses, mode).toEqual({
        "POST /v1/pets": 503,
        "GET /v1/pets": 503,
        "GET /v1/pets/{id}": 503,
      });
      for (const [route, res] of Object.entries(responses))
        await expect503(res, `${mode}: ${route}`);
      expect(await snapshot()).toEqual(before);
    });
  }

  it("a cold key cannot be authenticated while D1 is down: 503, not 401", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 100_000, perDay: 1_000_000 });
    await expect503(
      await viaApp(brokenDb(), "/v1/pets", { headers: auth(key) }),
      "cold key, queries reject",
    );
  });
});
