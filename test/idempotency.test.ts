import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../src/lib/crypto";
import { QUOTA_LIMITER_MIGRATIONS } from "../src/objects/quota-limiter-schema";
import { schemaVersion } from "../src/objects/schema-migrations";
import {
  auth,
  brokenDb,
  callWith,
  expect503,
  expectError,
  issueKey,
  mockClock,
  postJson,
} from "./helpers";

type Pet = { id: number; name: string; categoryId: number; status: string };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// Each test starts the clock at the real time (mockClock also restores every spy after each test).
const time = mockClock(() => Date.now());

const uniqueName = () => `idem-${crypto.randomUUID()}`;
const create = (key: string, body: unknown, idem?: string) =>
  postJson("/v1/pets", body, auth(key, idem === undefined ? {} : { "Idempotency-Key": idem }));
const petsNamed = async (name: string) =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM pets WHERE name = ?1")
    .bind(name)
    .first<{ n: number }>())!.n;
/** The request fingerprint: sha256 of the validated NewPet, fields in schema order. */
const fingerprintOf = (p: { name: string; categoryId: number; status?: string }) =>
  sha256Hex(
    JSON.stringify({ name: p.name, categoryId: p.categoryId, status: p.status ?? "available" }),
  );
const recordsOf = async (keyId: string) =>
  (
    await env.DB.prepare(
      "SELECT pet_id AS petId, created_at AS createdAt, expires_at AS expiresAt FROM idempotency_records WHERE key_id = ?1",
    )
      .bind(keyId)
      .all<{ petId: number; createdAt: number; expiresAt: number }>()
  ).results;

/**
 * The app with bindings that count what a request does: calls to the key's quota object (any
 * method) and D1 round trips (each `first`/`all`/`run`/`raw` or `batch`), through to the real ones.
 */
function countingApp() {
  const counts = { limiterCalls: 0, d1RoundTrips: 0 };
  const countStub = (stub: object) =>
    new Proxy(stub, {
      get(target, p) {
        const value = Reflect.get(target, p);
        if (typeof p !== "string" || p === "then" || typeof value !== "function") return value;
        return (...args: unknown[]) => {
          counts.limiterCalls++;
          // Reflect.apply: on an RPC stub, `value.apply` would itself be an RPC method.
          return Reflect.apply(value, target, args);
        };
      },
    });
  const QUOTA = {
    getByName: (name: string) => countStub(env.QUOTA.getByName(name)),
  } as unknown as Env["QUOTA"];
  const countQueries = (db: D1Database | D1DatabaseSession) => ({
    prepare: (sql: string) => {
      const real = db.prepare(sql);
      const wrap = (stmt: D1PreparedStatement): D1PreparedStatement =>
        new Proxy(stmt, {
          get(target, p) {
            const value = Reflect.get(target, p);
            if (typeof value !== "function") return value;
            if (p === "bind") return (...args: unknown[]) => wrap(value.apply(target, args));
            if (["first", "all", "run", "raw"].includes(p as string))
              return (...args: unknown[]) => {
                counts.d1RoundTrips++;
                return value.apply(target, args);
              };
            return value.bind(target);
          },
        });
      return wrap(real);
    },
    batch: (stmts: D1PreparedStatement[]) => {
      counts.d1RoundTrips++;
      return db.batch(stmts);
    },
  });
  const DB = {
    ...countQueries(env.DB),
    withSession: (bookmark?: string) => {
      const session = env.DB.withSession(bookmark);
      return { ...countQueries(session), getBookmark: () => session.getBookmark() };
    },
  } as unknown as D1Database;
  const send = (key: string, body: unknown, idem: string) =>
    callWith({ QUOTA, DB }, "/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": "application/json", "Idempotency-Key": idem }),
      body: JSON.stringify(body),
    });
  return { counts, send };
}

describe("retries with the same Idempotency-Key", () => {
  it("same key + same body → the original status, body and Location, Idempotent-Replayed: true, one pet", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 4, status: "pending" };
    const idem = crypto.randomUUID();
    const first = await create(key, pet, idem);
    expect(first.status).toBe(201);
    expect(first.headers.get("Idempotent-Replayed")).toBeNull();
    const original = (await first.json()) as Pet;
    expect(first.headers.get("Location")).toBe(`/v1/pets/${original.id}`);
    for (let i = 0; i < 2; i++) {
      const retry = await create(key, pet, idem);
      expect(retry.status).toBe(201);
      expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
      expect(retry.headers.get("Location")).toBe(first.headers.get("Location"));
      expect(await retry.json()).toEqual(original);
    }
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("the same body with another key order and whitespace is the same request", async () => {
    const { key } = await issueKey();
    const name = uniqueName();
    const idem = crypto.randomUUID();
    const first = await create(key, `{"name":"${name}","categoryId":3,"status":"sold"}`, idem);
    expect(first.status).toBe(201);
    const retry = await create(
      key,
      `{\n  "status" : "sold",\t"categoryId":3 ,\n "name": "${name}"  }\n`,
      idem,
    );
    expect(retry.status).toBe(201);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await retry.json()).toEqual(await first.json());
    expect(await petsNamed(name)).toBe(1);
  });

  it("same key + different body → 422 idempotency_key_reused, nothing created", async () => {
    const { key } = await issueKey();
    const [a, b] = [uniqueName(), uniqueName()];
    const idem = crypto.randomUUID();
    expect((await create(key, { name: a, categoryId: 1 }, idem)).status).toBe(201);
    await expectError(
      await create(key, { name: b, categoryId: 1 }, idem),
      422,
      "idempotency_key_reused",
    );
    await expectError(
      await create(key, { name: a, categoryId: 2 }, idem),
      422,
      "idempotency_key_reused",
    );
    await expectError(
      await create(key, { name: a, categoryId: 1, status: "sold" }, idem),
      422,
      "idempotency_key_reused",
    );
    expect(await petsNamed(b)).toBe(0);
    expect(
      (await create(key, { name: a, categoryId: 1 }, idem)).headers.get("Idempotent-Replayed"),
    ).toBe("true");
    expect(await petsNamed(a)).toBe(1);
  });

  it('the structured-field form "abc" is the same key as abc', async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 2 };
    const idem = `k-${crypto.randomUUID()}`;
    const first = await create(key, pet, `"${idem}"`);
    expect(first.status).toBe(201);
    const retry = await create(key, pet, idem);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await retry.json()).toEqual(await first.json());
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("keys are scoped per API key: the same Idempotency-Key under two keys makes two pets", async () => {
    const [k1, k2] = [await issueKey(), await issueKey()];
    const pet = { name: uniqueName(), categoryId: 5 };
    const idem = crypto.randomUUID();
    const [r1, r2] = [await create(k1.key, pet, idem), await create(k2.key, pet, idem)];
    expect([r1.status, r2.status]).toEqual([201, 201]);
    expect(r2.headers.get("Idempotent-Replayed")).toBeNull();
    expect(((await r1.json()) as Pet).id).not.toBe(((await r2.json()) as Pet).id);
    expect(await petsNamed(pet.name)).toBe(2);
  });

  it("replays count against the quota", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 1 };
    const idem = crypto.randomUUID();
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++)
      remaining.push(Number((await create(key, pet, idem)).headers.get("X-RateLimit-Remaining")));
    expect(remaining[1]).toBe(remaining[0]! - 1);
    expect(remaining[2]).toBe(remaining[0]! - 2);
  });
});

describe("invalid Idempotency-Key → 400", () => {
  it("empty, 256 characters, non-ASCII or control characters; 255 printable characters are fine", async () => {
    const { key } = await issueKey();
    const name = uniqueName();
    for (const bad of [
      "",
      '""',
      "x".repeat(256),
      `"${"x".repeat(256)}"`,
      "caf\u00e9",
      "a\tb",
      "a\u0001b",
      "a\u007fb",
    ]) {
      const body = await expectError(
        await create(key, { name, categoryId: 1 }, bad),
        400,
        "invalid_request",
      );
      expect(body.message).toMatch(/idempotency-key/i);
    }
    expect(await petsNamed(name)).toBe(0);
    expect((await create(key, { name, categoryId: 1 }, "x".repeat(255))).status).toBe(201);
  });

  it("a validation failure does not burn the key: the fixed body then creates with 201", async () => {
    const { key } = await issueKey();
    const idem = crypto.randomUUID();
    const name = uniqueName();
    await expectError(await create(key, { name: "", categoryId: 1 }, idem), 400, "invalid_request");
    await expectError(await create(key, "{not json", idem), 400, "invalid_request");
    const fixed = await create(key, { name, categoryId: 1 }, idem);
    expect(fixed.status).toBe(201);
    expect(fixed.headers.get("Idempotent-Replayed")).toBeNull();
    expect(await petsNamed(name)).toBe(1);
  });
});

describe("no claim can get stuck, and records expire", () => {
  it("a create whose D1 write failed leaves no record behind: the retry creates at once", async () => {
    const { key, id } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 6, status: "sold" };
    const idem = crypto.randomUUID();
    const headers = auth(key, { "Content-Type": "application/json", "Idempotency-Key": idem });
    const failed = await callWith({ DB: brokenDb() }, "/v1/pets", {
      method: "POST",
      headers,
      body: JSON.stringify(pet),
    });
    await expect503(failed, "the create while D1 fails");
    expect(await recordsOf(id)).toEqual([]);
    // No waiting: there is no claim to time out.
    const retry = await create(key, pet, idem);
    expect(retry.status).toBe(201);
    expect(retry.headers.get("Idempotent-Replayed")).toBeNull();
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("the record names the pet and expires 24 h after the create", async () => {
    const { key, id } = await issueKey();
    const t0 = time.now;
    const pet = (await (
      await create(key, { name: uniqueName(), categoryId: 2 }, crypto.randomUUID())
    ).json()) as Pet;
    expect(await recordsOf(id)).toEqual([{ petId: pet.id, createdAt: t0, expiresAt: t0 + DAY }]);
  });

  it("records expire after 24 h: the same key and body then create a new pet, which later retries get", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 8 };
    const idem = crypto.randomUUID();
    const first = (await (await create(key, pet, idem)).json()) as Pet;
    time.now += DAY - 1;
    expect((await create(key, pet, idem)).headers.get("Idempotent-Replayed")).toBe("true");
    time.now += 1; // exactly 24 h after the first
    const later = await create(key, pet, idem);
    expect(later.status).toBe(201);
    expect(later.headers.get("Idempotent-Replayed")).toBeNull();
    const second = (await later.json()) as Pet;
    expect(second.id).not.toBe(first.id);
    const retry = await create(key, pet, idem);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await retry.json()).toEqual(second);
    expect(await petsNamed(pet.name)).toBe(2);
  });

  it("an expired key may be reused with another body (no 422)", async () => {
    const { key } = await issueKey();
    const idem = crypto.randomUUID();
    expect((await create(key, { name: uniqueName(), categoryId: 1 }, idem)).status).toBe(201);
    time.now += DAY;
    const other = { name: uniqueName(), categoryId: 2 };
    const res = await create(key, other, idem);
    expect(res.status).toBe(201);
    expect(await petsNamed(other.name)).toBe(1);
  });

  it("a create removes its own key's expired record even when the sweep takes older ones first", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1_000, perDay: 10_000 });
    const other = await issueKey("enterprise", { perMinute: 1_000, perDay: 10_000 });
    // Nine records of another key expire before this key's: a sweep of eight leaves this one.
    for (let i = 0; i < 9; i++)
      expect(
        (await create(other.key, { name: uniqueName(), categoryId: 1 }, `o-${i}`)).status,
      ).toBe(201);
    time.now += 1;
    const idem = crypto.randomUUID();
    expect((await create(key, { name: uniqueName(), categoryId: 1 }, idem)).status).toBe(201);
    time.now += DAY; // this key's record has just expired
    const { n } = (await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM idempotency_records WHERE expires_at < ?1",
    )
      .bind(time.now)
      .first<{ n: number }>())!;
    expect(n, "expired records older than this key's").toBeGreaterThanOrEqual(9);
    const reused = { name: uniqueName(), categoryId: 2 };
    const res = await create(key, reused, idem);
    expect(res.status).toBe(201);
    expect(res.headers.get("Idempotent-Replayed")).toBeNull();
    expect(await petsNamed(reused.name)).toBe(1);
  });

  it("later creates sweep expired records, so the table holds about one day of creates", async () => {
    const { key, id } = await issueKey("enterprise", { perMinute: 1_000, perDay: 10_000 });
    for (let i = 0; i < 3; i++)
      expect((await create(key, { name: uniqueName(), categoryId: 1 }, `old-${i}`)).status).toBe(
        201,
      );
    expect(await recordsOf(id)).toHaveLength(3);
    time.now += DAY + 1;
    // Another key's create sweeps them: the sweep is not limited to the creating key.
    const other = await issueKey();
    expect((await create(other.key, { name: uniqueName(), categoryId: 1 }, "new")).status).toBe(
      201,
    );
    expect(await recordsOf(id)).toEqual([]);
  });
});

describe("one round trip", () => {
  it("an idempotent create makes at most one limiter call (none from a lease) and one D1 round trip; so does a replay", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 3 };
    const idem = crypto.randomUUID();
    // Authenticate once first: the app's module then holds the key record (no D1 read for it).
    expect((await callWith({}, "/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
    for (const replayed of [null, "true"]) {
      const { counts, send } = countingApp();
      const res = await send(key, pet, idem);
      expect(res.status).toBe(201);
      expect(res.headers.get("Idempotent-Replayed")).toBe(replayed);
      expect(counts.d1RoundTrips).toBe(1);
      // Admission leases (quota/lease.ts) may admit a warm key's request with no call at all.
      expect(counts.limiterCalls).toBeLessThanOrEqual(1);
    }
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("the key's quota object no longer holds idempotency records: its old table is dropped", async () => {
    const { key, id } = await issueKey();
    expect((await create(key, { name: uniqueName(), categoryId: 1 }, "x")).status).toBe(201);
    const { version, tables } = await runInDurableObject(env.QUOTA.getByName(id), (_i, ctx) => ({
      version: schemaVersion(ctx.storage.sql),
      tables: ctx.storage.sql
        .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
        .toArray()
        .map((r) => r.name),
    }));
    expect(version).toBe(QUOTA_LIMITER_MIGRATIONS.length);
    expect(tables).not.toContain("idempotency");
  });
});

describe("two requests never create two pets", () => {
  it("50 racing retries with one key → exactly one pet; every answer is a 201 with that pet", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1_000, perDay: 10_000 });
    const pet = { name: uniqueName(), categoryId: 9 };
    const idem = crypto.randomUUID();
    const responses = await Promise.all(Array.from({ length: 50 }, () => create(key, pet, idem)));
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(201));
    const fresh = responses.filter((r) => r.headers.get("Idempotent-Replayed") === null);
    expect(fresh).toHaveLength(1);
    const ids = await Promise.all(responses.map(async (r) => ((await r.json()) as Pet).id));
    expect(new Set(ids).size).toBe(1);
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("racing different bodies under one key → one 201, the rest 422, one pet", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1_000, perDay: 10_000 });
    const idem = crypto.randomUUID();
    const names = Array.from({ length: 20 }, uniqueName);
    const responses = await Promise.all(
      names.map((name) => create(key, { name, categoryId: 1 }, idem)),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 422)).toHaveLength(19);
    for (const r of responses.filter((r) => r.status === 422))
      await expectError(r, 422, "idempotency_key_reused");
    const counts = await Promise.all(names.map(petsNamed));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
    const winner = names[statuses.indexOf(201)]!;
    expect(await petsNamed(winner)).toBe(1);
  });
});

describe("creates recorded before the records moved to D1 (migration 0004)", () => {
  it("a create that left only its reference on the pet is carried over: its retry replays that pet", async () => {
    const { key, id } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 4, status: "pending" };
    const idem = crypto.randomUUID();
    // What the previous code stored: "<key id>:<sha256 of Idempotency-Key>:<fingerprint>".
    const ref = `${id}:${await sha256Hex(idem)}:${await fingerprintOf(pet)}`;
    const old = await env.DB.prepare(
      `INSERT INTO pets (name, category_id, status, idempotency_ref, idempotency_at)
       VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id`,
    )
      .bind(pet.name, pet.categoryId, pet.status, ref, time.now - HOUR)
      .first<{ id: number }>();
    // The migration's carry-over statement, as shipped (the test setup ran it on an empty table).
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.startsWith("0004"));
    const carryOver = migration?.queries.find((q) => /INSERT INTO idempotency_records/i.test(q));
    expect(carryOver).toBeDefined();
    await env.DB.prepare(carryOver!).run();
    expect(await recordsOf(id)).toEqual([
      { petId: old!.id, createdAt: time.now - HOUR, expiresAt: time.now - HOUR + DAY },
    ]);

    const retry = await create(key, pet, idem);
    expect(retry.status).toBe(201);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(((await retry.json()) as Pet).id).toBe(old!.id);
    await expectError(
      await create(key, { ...pet, categoryId: 5 }, idem),
      422,
      "idempotency_key_reused",
    );
    expect(await petsNamed(pet.name)).toBe(1);
  });
});
