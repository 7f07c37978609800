import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../src/lib/crypto";
import { auth, callWith, expectError, issueKey, mockClock, postJson } from "./helpers";

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

/** The app with a QUOTA namespace whose stubs fail `method` (the limiter unreachable for it). */
function appWithFailing(method: "claimIdempotencyKey" | "completeIdempotencyKey") {
  const getByName = (name: string) => {
    const stub = env.QUOTA.getByName(name) as unknown as Record<
      string,
      (...args: unknown[]) => unknown
    >;
    // Every RPC goes to the real stub, except `method`, which fails.
    const get = (_t: object, p: string | symbol) =>
      p === "then" || typeof p !== "string"
        ? undefined
        : p === method
          ? () => Promise.reject(new Error("limiter unreachable"))
          : (...args: unknown[]) => stub[p]!(...args);
    return new Proxy({}, { get });
  };
  const QUOTA = { getByName } as unknown as Env["QUOTA"];
  return (key: string, body: unknown, idem: string) => {
    const headers = auth(key, { "Content-Type": "application/json", "Idempotency-Key": idem });
    return callWith({ QUOTA }, "/v1/pets", { method: "POST", headers, body: JSON.stringify(body) });
  };
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

describe("in flight, stale claims and expiry", () => {
  it("while the first request is in flight → 409 idempotency_key_in_flight with Retry-After", async () => {
    const k = await issueKey();
    const pet = { name: uniqueName(), categoryId: 6, status: "sold" };
    const idem = crypto.randomUUID();
    expect(
      await env.QUOTA.getByName(k.id).claimIdempotencyKey(idem, await fingerprintOf(pet)),
    ).toEqual({ state: "proceed" });
    time.now += 59_000;
    const res = await create(k.key, pet, idem);
    expect(res.headers.get("Retry-After")).toMatch(/^[1-9][0-9]*$/);
    await expectError(res, 409, "idempotency_key_in_flight");
    expect(await petsNamed(pet.name)).toBe(0);
  });

  it("a stale in-flight claim (60 s) is taken over, and creates only one pet", async () => {
    const k = await issueKey();
    const pet = { name: uniqueName(), categoryId: 6 };
    const idem = crypto.randomUUID();
    await env.QUOTA.getByName(k.id).claimIdempotencyKey(idem, await fingerprintOf(pet));
    time.now += 61_000;
    const res = await create(k.key, pet, idem);
    expect(res.status).toBe(201);
    const retry = await create(k.key, pet, idem);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await retry.json()).toEqual(await res.json());
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("a first request that created the pet but never recorded it: 409 within 60 s, then the same pet, never a second", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 7 };
    const idem = crypto.randomUUID();
    const first = await appWithFailing("completeIdempotencyKey")(key, pet, idem);
    expect(first.status).toBe(201);
    const original = (await first.json()) as Pet;
    time.now += 30_000;
    await expectError(await create(key, pet, idem), 409, "idempotency_key_in_flight");
    time.now += 31_000;
    const takeover = await create(key, pet, idem);
    expect(takeover.status).toBe(201);
    expect(takeover.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await takeover.json()).toEqual(original);
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("records expire after 24 h: the same key and body then create a new pet", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 8 };
    const idem = crypto.randomUUID();
    const first = (await (await create(key, pet, idem)).json()) as Pet;
    time.now += DAY - 1;
    expect((await create(key, pet, idem)).headers.get("Idempotent-Replayed")).toBe("true");
    time.now += 2; // 24 h + 1 ms after the first
    const later = await create(key, pet, idem);
    expect(later.status).toBe(201);
    expect(later.headers.get("Idempotent-Replayed")).toBeNull();
    expect(((await later.json()) as Pet).id).not.toBe(first.id);
    expect(await petsNamed(pet.name)).toBe(2);
  });

  it("the alarm purges expired records and re-arms for the oldest remaining one", async () => {
    const k = await issueKey();
    const stub = env.QUOTA.getByName(k.id);
    const t0 = time.now;
    const [old, young] = [`old-${crypto.randomUUID()}`, `young-${crypto.randomUUID()}`];
    expect((await create(k.key, { name: uniqueName(), categoryId: 1 }, old)).status).toBe(201);
    time.now = t0 + HOUR;
    expect((await create(k.key, { name: uniqueName(), categoryId: 1 }, young)).status).toBe(201);
    const keys = () =>
      runInDurableObject(stub, (_i, ctx) =>
        ctx.storage.sql
          .exec<{ k: string }>("SELECT idem_key AS k FROM idempotency ORDER BY k")
          .toArray()
          .map((r) => r.k),
      );
    expect(await keys()).toEqual([old, young].sort());
    time.now = t0 + DAY + 1;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await keys()).toEqual([young]);
    expect(await runInDurableObject(stub, (_i, ctx) => ctx.storage.getAlarm())).toBe(
      t0 + HOUR + DAY,
    );
  });
});

describe("two requests never create two pets", () => {
  it("20 simultaneous identical requests with one key → exactly one pet", async () => {
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 9 };
    const idem = crypto.randomUUID();
    const responses = await Promise.all(Array.from({ length: 20 }, () => create(key, pet, idem)));
    const statuses = responses.map((r) => r.status);
    for (const s of statuses) expect([201, 409]).toContain(s);
    const created = responses.filter(
      (r) => r.status === 201 && r.headers.get("Idempotent-Replayed") === null,
    );
    expect(created).toHaveLength(1);
    const ids = await Promise.all(
      responses.filter((r) => r.status === 201).map(async (r) => ((await r.json()) as Pet).id),
    );
    expect(new Set(ids).size).toBe(1);
    expect(await petsNamed(pet.name)).toBe(1);
  });

  it("limiter unreachable during the claim: the database guard still prevents a second pet", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const { key } = await issueKey();
    const pet = { name: uniqueName(), categoryId: 10 };
    const idem = crypto.randomUUID();
    const send = appWithFailing("claimIdempotencyKey");
    const first = await send(key, pet, idem);
    expect(first.status).toBe(201);
    const original = await first.json();
    const retry = await send(key, pet, idem);
    expect(retry.status).toBe(201);
    expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await retry.json()).toEqual(original);
    // A retry through the healthy limiter finds the same pet too.
    const healthy = await create(key, pet, idem);
    expect(await healthy.json()).toEqual(original);
    expect(await petsNamed(pet.name)).toBe(1);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining("idempotency records unreachable"));
  });
});
