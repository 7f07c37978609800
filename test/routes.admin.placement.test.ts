// Where a key's quota object lives: the admin views of a key never used answer zeros without
// creating its object (nor a location holder of it), admin changes to it push nothing, and its
// first request marks it used so that from then on the admin views read the object exactly.
import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getKey } from "../src/db/keys";
import { markFirstUse } from "../src/middleware/first-use";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { policyOf, unusedKeyUsage } from "../src/objects/quota-limiter-client";
import {
  ADMIN,
  auth,
  call,
  issueKey,
  keyDetail,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);
const TODAY = new Date(T0).toISOString().slice(0, 10);

/** Whether the key's quota object, or any location holder of the key, has been created. */
async function objectsOf(keyId: string): Promise<{ limiter: boolean; holders: number }> {
  const limiterId = env.QUOTA.idFromName(keyId);
  const limiters = await listDurableObjectIds(env.QUOTA);
  const holders = await listDurableObjectIds(env.QUOTA_HOLDER);
  return {
    limiter: limiters.some((id) => id.equals(limiterId)),
    holders: holders.filter((id) => id.name?.startsWith(`${keyId}@`)).length,
  };
}

async function jsonOf<T>(res: Response): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBeLessThan(300);
  return JSON.parse(text) as T;
}

interface Detail {
  usage: {
    minute: { count: number; limit: number };
    day: { count: number; limit: number };
    bannedUntil: string | null;
  };
}
interface Listed {
  id: string;
  activity: { lastUsedDay: string | null; today: { used: number; limit: number } } | null;
}
interface Day {
  day: string;
  admitted: number;
}

/** Every admin read of one key: detail, list, usage history as JSON and CSV, and an unban. */
async function readEverything(keyId: string) {
  const detail = await jsonOf<Detail>(await keyDetail(keyId));
  const listed = (
    await jsonOf<{ data: Listed[] }>(await call("/admin/v1/keys?limit=100", { headers: ADMIN }))
  ).data.find((k) => k.id === keyId);
  const history = await jsonOf<{ data: Day[] }>(
    await call(`/admin/v1/keys/${keyId}/usage?from=${TODAY}&to=${TODAY}`, { headers: ADMIN }),
  );
  const csvRes = await call(`/admin/v1/keys/${keyId}/usage?from=${TODAY}&to=${TODAY}`, {
    headers: { ...ADMIN, Accept: "text/csv" },
  });
  expect(csvRes.status).toBe(200);
  const csv = await csvRes.text();
  const unbanned = await jsonOf<Detail>(
    await call(`/admin/v1/keys/${keyId}/unban`, { method: "POST", headers: ADMIN }),
  );
  return { detail, listed, history: history.data, csv, unbanned };
}

describe("a key never used", () => {
  it("is read as zeros by every admin view, and none of them creates its object", async () => {
    time.now = T0;
    const k = await issueKey("pro");
    const seen = await readEverything(k.id);
    expect(seen.detail.usage).toEqual({
      minute: { count: 0, limit: k.limits.perMinute, resetAt: expect.any(String) },
      day: { count: 0, limit: k.limits.perDay, resetAt: expect.any(String) },
      bannedUntil: null,
    });
    expect(seen.unbanned.usage).toEqual(seen.detail.usage);
    expect(seen.listed?.activity).toEqual({
      lastUsedDay: null,
      today: { used: 0, limit: k.limits.perDay },
      bannedUntil: null,
    });
    expect(seen.history).toEqual([
      {
        day: TODAY,
        admitted: 0,
        refused: { rate_limited: 0, quota_exceeded: 0, key_banned: 0 },
      },
    ]);
    expect(seen.csv.split("\r\n")[1]).toBe(`"${TODAY}","0","0","0","0"`);
    expect(await objectsOf(k.id)).toEqual({ limiter: false, holders: 0 });
  });

  it("is changed, rolled and revoked without creating its object", async () => {
    time.now = T0;
    const k = await issueKey("free");
    expect((await patchKey(k.id, { plan: "pro" })).status).toBe(200);
    expect((await patchKey(k.id, { enabled: false })).status).toBe(200);
    expect((await patchKey(k.id, { enabled: true })).status).toBe(200);
    expect((await postJson(`/admin/v1/keys/${k.id}/roll`, {}, ADMIN)).status).toBe(201);
    expect(
      (await call(`/admin/v1/keys/${k.id}`, { method: "DELETE", headers: ADMIN })).status,
    ).toBe(200);
    expect(await objectsOf(k.id)).toEqual({ limiter: false, holders: 0 });
    expect((await getKey(env.DB, k.id))?.firstUsedAt).toBeNull();
  });

  it("is answered what a fresh object would report", async () => {
    time.now = T0 + 12_345;
    const policy = { perMinute: 7, perDay: 70, version: 3, revoked: false };
    const fresh = await runInDurableObject(
      env.QUOTA.getByName("key_placement_scratch"),
      (object: QuotaLimiter) => object.usage(policy),
    );
    expect(unusedKeyUsage(policy, time.now)).toEqual(fresh);
  });
});

describe("a key's first request", () => {
  it("marks the key used before it is answered; from then on the admin views read the object exactly", async () => {
    time.now = T0;
    const k = await issueKey("pro");
    for (let i = 0; i < 3; i++)
      expect((await call("/v1/pets?limit=1", { headers: auth(k.key) })).status).toBe(200);
    expect((await getKey(env.DB, k.id))?.firstUsedAt).toBe(T0);
    expect((await objectsOf(k.id)).limiter).toBe(true);
    const seen = await readEverything(k.id);
    expect(seen.detail.usage.minute.count).toBe(3);
    expect(seen.detail.usage.day.count).toBe(3);
    expect(seen.listed?.activity).toMatchObject({ lastUsedDay: TODAY, today: { used: 3 } });
    expect(seen.history[0]?.admitted).toBe(3);
    // The mark is written once: a later request does not move it.
    time.now = T0 + 5_000;
    expect((await call("/v1/pets?limit=1", { headers: auth(k.key) })).status).toBe(200);
    expect((await getKey(env.DB, k.id))?.firstUsedAt).toBe(T0);
  });

  it("made with a record older than a revocation that found the key unused: the object still learns of it", async () => {
    time.now = T0;
    const k = await issueKey("pro");
    // A Worker read the key before the revocation…
    const stale = (await getKey(env.DB, k.id))!;
    expect(
      (await call(`/admin/v1/keys/${k.id}`, { method: "DELETE", headers: ADMIN })).status,
    ).toBe(200);
    // …the revocation found no object to tell. The stale request creates the object with its old
    // policy and marks the key: the mark brings the revocation, pushed to the object.
    const stub = env.QUOTA.getByName(k.id);
    await Promise.all([stub.admit(policyOf(stale)), markFirstUse(env, stale)]);
    expect(await objectsOf(k.id)).toEqual({ limiter: true, holders: 0 });
    const next = await stub.admit(policyOf(stale));
    expect(next.outcome).toBe("revoked");
  });
});
