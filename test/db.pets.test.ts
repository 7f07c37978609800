import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Queryable } from "../src/db/database-error";
import {
  changeKey,
  findKeyByHash,
  getKey,
  insertKey,
  listKeys,
  type NewKey,
  settingsOf,
} from "../src/db/keys";
import { createPet, createPetIdempotently, getPet, listPets } from "../src/db/pets";
import { sha256Hex } from "../src/lib/crypto";

// Storage is shared by the tests of this file: each test reads only past the largest id it saw first.
async function maxPetId(): Promise<number> {
  const row = await env.DB.prepare("SELECT COALESCE(MAX(id), 0) AS m FROM pets").first<{
    m: number;
  }>();
  return row!.m;
}

let keySeq = 0;
function newKey(over: Partial<NewKey> = {}): NewKey {
  keySeq += 1;
  const id = `key_db${String(keySeq).padStart(18, "0")}`;
  return {
    id,
    name: `k${keySeq}`,
    hash: `hash-${id}`,
    prefix: "pet_test_abcd",
    plan: "pro",
    ownLimits: null,
    expiresAt: null,
    now: 1_000_000 + keySeq,
    ...over,
  };
}

const settings = settingsOf;

const audit = (keyId: string, at: number) => ({
  at,
  actor: "tester",
  action: "update" as const,
  keyId,
  changes: {},
  requestId: "req-1",
  clientRequestId: null,
});

async function auditCount(keyId: string): Promise<number> {
  return (await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_log WHERE key_id = ?")
    .bind(keyId)
    .first<{ n: number }>())!.n;
}

describe("pets data layer", () => {
  it("createPet returns the stored row with API field names and a fresh id", async () => {
    const before = await maxPetId();
    const pet = await createPet(env.DB, { name: "Rex", categoryId: 7, status: "pending" });
    expect(pet).toEqual({ id: expect.any(Number), name: "Rex", categoryId: 7, status: "pending" });
    expect(Object.keys(pet).sort()).toEqual(["categoryId", "id", "name", "status"]);
    expect(pet.id).toBeGreaterThan(before);
    const second = await createPet(env.DB, { name: "Tom", categoryId: 1, status: "available" });
    expect(second.id).toBeGreaterThan(pet.id);
  });

  it("stores categoryId up to 2^53-1 exactly", async () => {
    const pet = await createPet(env.DB, {
      name: "Max",
      categoryId: Number.MAX_SAFE_INTEGER,
      status: "sold",
    });
    expect(pet.categoryId).toBe(Number.MAX_SAFE_INTEGER);
    expect((await getPet(env.DB, pet.id))!.categoryId).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("getPet finds a pet by id and returns null for an unknown id", async () => {
    const pet = await createPet(env.DB, { name: "Bella", categoryId: 3, status: "available" });
    expect(await getPet(env.DB, pet.id)).toEqual(pet);
    expect(await getPet(env.DB, pet.id + 1000)).toBeNull();
  });

  it("listPets returns pets in ascending id order, honouring limit and afterId", async () => {
    const start = await maxPetId();
    const made = [];
    for (let i = 0; i < 5; i++)
      made.push(await createPet(env.DB, { name: `p${i}`, categoryId: 1, status: "available" }));
    const all = await listPets(env.DB, { limit: 100, afterId: start });
    expect(all).toEqual(made);
    const ids = all.map((p) => p.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));

    expect(await listPets(env.DB, { limit: 2, afterId: start })).toEqual(made.slice(0, 2));
    expect(await listPets(env.DB, { limit: 2, afterId: made[1]!.id })).toEqual(made.slice(2, 4));
    expect(await listPets(env.DB, { limit: 10, afterId: made[4]!.id })).toEqual([]);
  });

  it("listPets without afterId starts from the smallest id", async () => {
    const first = await listPets(env.DB, { limit: 1 });
    const min = await env.DB.prepare("SELECT MIN(id) AS m FROM pets").first<{ m: number }>();
    expect(first).toHaveLength(1);
    expect(first[0]!.id).toBe(min!.m);
  });

  it("listPets filters by status", async () => {
    const start = await maxPetId();
    const a = await createPet(env.DB, { name: "a", categoryId: 1, status: "available" });
    const p = await createPet(env.DB, { name: "p", categoryId: 1, status: "pending" });
    const s = await createPet(env.DB, { name: "s", categoryId: 1, status: "sold" });
    const p2 = await createPet(env.DB, { name: "p2", categoryId: 2, status: "pending" });
    expect(await listPets(env.DB, { limit: 10, status: "pending", afterId: start })).toEqual([
      p,
      p2,
    ]);
    expect(await listPets(env.DB, { limit: 10, status: "sold", afterId: start })).toEqual([s]);
    expect(await listPets(env.DB, { limit: 10, status: "available", afterId: start })).toEqual([a]);
    expect(await listPets(env.DB, { limit: 1, status: "pending", afterId: start })).toEqual([p]);
    expect(await listPets(env.DB, { limit: 10, status: "pending", afterId: p.id })).toEqual([p2]);
  });

  it("the schema refuses rows the API would never accept", async () => {
    await expect(
      createPet(env.DB, { name: "", categoryId: 1, status: "available" }),
    ).rejects.toThrow(/CHECK constraint failed/);
    await expect(
      createPet(env.DB, { name: "x", categoryId: 0, status: "available" }),
    ).rejects.toThrow(/CHECK constraint failed/);
    await expect(
      createPet(env.DB, { name: "x", categoryId: 1, status: "Available" as "available" }),
    ).rejects.toThrow(/CHECK constraint failed/);
  });
});

describe("pets data layer: answers that contradict what was written are errors", () => {
  it("createPet rejects when the insert gives back no row, rather than answer with no pet", async () => {
    const noRow = {
      prepare: () => ({ bind: () => ({ first: async () => null }) }),
      batch: env.DB.batch.bind(env.DB),
    } as unknown as Queryable;
    await expect(
      createPet(noRow, { name: "Rex", categoryId: 1, status: "available" }),
    ).rejects.toMatchObject({
      message: "D1 query failed",
      cause: expect.objectContaining({ message: "INSERT … RETURNING returned no row" }),
    });
  });

  it("createPetIdempotently rejects a record that names another pet than the one it inserted", async () => {
    // The batch really runs; only the record's row as read back is altered to name another pet.
    let misreadRows = 0;
    const misread = {
      prepare: env.DB.prepare.bind(env.DB),
      batch: async (stmts: D1PreparedStatement[]) => {
        const results = await env.DB.batch(stmts);
        const found = results[4]?.results as { id: number }[] | undefined;
        if (found?.[0]) {
          found[0] = { ...found[0], id: found[0].id + 1 };
          misreadRows++;
        }
        return results;
      },
    } as unknown as Queryable;
    const record = {
      keyId: "key_contradiction",
      idemKeyHash: "a".repeat(64),
      fingerprint: "b".repeat(64),
      now: 1_000_000,
      ttlMs: 86_400_000,
    };
    const pet = { name: "Rex", categoryId: 1, status: "available" } as const;
    await expect(createPetIdempotently(misread, pet, record)).rejects.toThrow(
      "idempotency record names another pet",
    );
    expect(misreadRows, "the record's row was read back and altered").toBe(1);
    // Read as it is, the same record replays the pet that was inserted.
    const replay = await createPetIdempotently(env.DB, pet, record);
    expect(replay).toMatchObject({ outcome: "replayed", pet });
  });
});

describe("api key data layer", () => {
  it("insertKey returns the record without secret or hash; limits from the plan table", async () => {
    const k = newKey({ plan: "free", expiresAt: 5_000_000 });
    const rec = await insertKey(env.DB, k);
    expect(rec).toEqual({
      id: k.id,
      name: k.name,
      prefix: "pet_test_abcd",
      plan: "free",
      limits: { perMinute: 60, perDay: 1000 },
      version: 1,
      createdAt: k.now,
      updatedAt: k.now,
      revokedAt: null,
      expiresAt: 5_000_000,
      disabledAt: null,
      ownerId: null,
      meta: null,
      rolledAt: null,
      previousSecretExpiresAt: null,
      region: null,
      firstUsedAt: null,
      bannedUntil: null,
    });
    expect(JSON.stringify(rec)).not.toContain(k.hash);
  });

  it("insertKey stores enterprise limits, and the table refuses them for other plans", async () => {
    const rec = await insertKey(
      env.DB,
      newKey({ plan: "enterprise", ownLimits: { perMinute: 5, perDay: 50 } }),
    );
    expect(rec.limits).toEqual({ perMinute: 5, perDay: 50 });
    await expect(
      insertKey(env.DB, newKey({ plan: "enterprise", ownLimits: null })),
    ).rejects.toThrow();
    await expect(
      insertKey(env.DB, newKey({ plan: "pro", ownLimits: { perMinute: 5, perDay: 50 } })),
    ).rejects.toThrow();
  });

  it("findKeyByHash finds by the hash only; getKey by id", async () => {
    const hash = await sha256Hex("pet_test_something");
    const rec = await insertKey(env.DB, newKey({ hash }));
    expect(await findKeyByHash(env.DB, hash)).toEqual({ record: rec, secret: "current" });
    expect(await findKeyByHash(env.DB, await sha256Hex("pet_test_other"))).toBeNull();
    expect(await findKeyByHash(env.DB, rec.id)).toBeNull();
    expect(await getKey(env.DB, rec.id)).toEqual(rec);
    expect(await getKey(env.DB, "key_nope")).toBeNull();
  });

  it("key hashes are unique", async () => {
    await insertKey(env.DB, newKey({ hash: "dup-hash" }));
    await expect(insertKey(env.DB, newKey({ hash: "dup-hash" }))).rejects.toThrow();
  });

  it("changeKey writes the settings, bumps version and updatedAt, and appends its audit entry in the same batch", async () => {
    const rec = await insertKey(env.DB, newKey({ plan: "pro" }));
    const up = await changeKey(
      env.DB,
      rec.id,
      rec.version,
      {
        ...settings(rec),
        name: "renamed",
        plan: "enterprise",
        ownLimits: { perMinute: 9, perDay: 99 },
        ownerId: "acct_1",
        meta: { tier: "gold" },
      },
      audit(rec.id, rec.createdAt + 10),
    );
    expect(up).toEqual({
      ...rec,
      name: "renamed",
      plan: "enterprise",
      limits: { perMinute: 9, perDay: 99 },
      ownerId: "acct_1",
      meta: { tier: "gold" },
      version: 2,
      updatedAt: rec.createdAt + 10,
    });
    expect(await auditCount(rec.id)).toBe(1);
    const back = await changeKey(
      env.DB,
      rec.id,
      2,
      { ...settings(up!), plan: "business", ownLimits: null },
      audit(rec.id, rec.createdAt + 20),
    );
    expect(back!.limits).toEqual({ perMinute: 1000, perDay: 100_000 });
    expect(back!.version).toBe(3);
    expect(await getKey(env.DB, rec.id)).toEqual(back);
    expect(await auditCount(rec.id)).toBe(2);
  });

  it("changeKey writes nothing, not even the audit entry, when the key changed since it was read, or is gone", async () => {
    const rec = await insertKey(env.DB, newKey());
    const stale = await changeKey(
      env.DB,
      rec.id,
      rec.version + 1,
      { ...settings(rec), name: "lost" },
      audit(rec.id, rec.createdAt + 1),
    );
    expect(stale).toBeNull();
    expect((await getKey(env.DB, rec.id))!.name).toBe(rec.name);
    expect(await auditCount(rec.id)).toBe(0);
    expect(
      await changeKey(env.DB, "key_missing", 1, settings(rec), audit("key_missing", 1)),
    ).toBeNull();
    expect(await auditCount("key_missing")).toBe(0);
  });

  it("listKeys pages in (createdAt, id) order", async () => {
    const base = 9_000_000;
    const made = [];
    // Two keys share a createdAt so the id breaks the tie.
    for (const [i, at] of [
      [1, base],
      [2, base],
      [3, base + 1],
      [4, base + 2],
      [5, base + 3],
    ] as const) {
      made.push(
        await insertKey(env.DB, newKey({ id: `key_pg${String(i).padStart(18, "0")}`, now: at })),
      );
    }
    const start = { createdAt: base - 1, id: "" };
    expect((await listKeys(env.DB, 10, start)).map((k) => k.id)).toEqual(made.map((k) => k.id));
    const p1 = await listKeys(env.DB, 2, start);
    expect(p1).toEqual(made.slice(0, 2));
    const last = p1[1]!;
    const p2 = await listKeys(env.DB, 2, { createdAt: last.createdAt, id: last.id });
    expect(p2).toEqual(made.slice(2, 4));
    const p3 = await listKeys(env.DB, 2, { createdAt: p2[1]!.createdAt, id: p2[1]!.id });
    expect(p3).toEqual(made.slice(4));
    expect(await listKeys(env.DB, 2, { createdAt: made[4]!.createdAt, id: made[4]!.id })).toEqual(
      [],
    );
    // Without a cursor: from the oldest key.
    const all = await listKeys(env.DB, 1000);
    expect(all.length).toBeGreaterThanOrEqual(5);
    const order = all.map((k) => [k.createdAt, k.id] as const);
    expect(order).toEqual(
      [...order].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0)),
    );
  });
});
