// Where a key's quota object lives: the admin views of a key never used answer zeros without
// creating its object (nor a location holder of it), admin changes to it push nothing, and its
// first request marks it used so that from then on the admin views read the object exactly. A
// key's region is the location hint its object is created with.
import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getKey, policyOf } from "../src/db/keys";
import type { ApiError } from "../src/lib/errors";
import { markFirstUseOrThrow } from "../src/middleware/first-use";
import { holderName } from "../src/objects/quota-holder";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { unusedKeyUsage } from "../src/objects/quota-limiter-client";
import { REGIONS } from "../src/schemas/region";
import {
  ADMIN,
  auth,
  BASE,
  call,
  callWith,
  expectError,
  issueKey,
  keyDetail,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);
const TODAY = new Date(T0).toISOString().slice(0, 10);

/** The operator's location: every admin read here arrives there, as it would in production. */
const OPERATOR_COLO = "FRA";

/** An admin request arriving in the operator's location. */
function operatorCall(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(
    new Request(`${BASE}${path}`, { ...init, cf: { colo: OPERATOR_COLO } }),
  );
}

/**
 * Whether the key's quota object has been created, and how many location holders of the key
 * among those of the operator's location and of `colos`.
 */
async function objectsOf(
  keyId: string,
  colos: string[] = [],
): Promise<{ limiter: boolean; holders: number }> {
  const limiterId = env.QUOTA.idFromName(keyId);
  const holderIds = [OPERATOR_COLO, ...colos].map((colo) =>
    env.QUOTA_HOLDER.idFromName(holderName(keyId, colo)),
  );
  const limiters = await listDurableObjectIds(env.QUOTA);
  const holders = await listDurableObjectIds(env.QUOTA_HOLDER);
  return {
    limiter: limiters.some((id) => id.equals(limiterId)),
    holders: holders.filter((id) => holderIds.some((h) => h.equals(id))).length,
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
  const detail = await jsonOf<Detail>(
    await operatorCall(`/admin/v1/keys/${keyId}`, { headers: ADMIN }),
  );
  const listed = (
    await jsonOf<{ data: Listed[] }>(
      await operatorCall("/admin/v1/keys?limit=100", { headers: ADMIN }),
    )
  ).data.find((k) => k.id === keyId);
  const history = await jsonOf<{ data: Day[] }>(
    await operatorCall(`/admin/v1/keys/${keyId}/usage?from=${TODAY}&to=${TODAY}`, {
      headers: ADMIN,
    }),
  );
  const csvRes = await operatorCall(`/admin/v1/keys/${keyId}/usage?from=${TODAY}&to=${TODAY}`, {
    headers: { ...ADMIN, Accept: "text/csv" },
  });
  expect(csvRes.status).toBe(200);
  const csv = await csvRes.text();
  const unbanned = await jsonOf<Detail>(
    await operatorCall(`/admin/v1/keys/${keyId}/unban`, { method: "POST", headers: ADMIN }),
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
    // One day, every count in it zero (in JSON and in the CSV row).
    expect(seen.history.map((d) => d.day)).toEqual([TODAY]);
    const counts = JSON.stringify(seen.history[0]).match(/:\d+/g) ?? [];
    expect(counts.length).toBeGreaterThanOrEqual(4);
    expect(counts.every((c) => c === ":0")).toBe(true);
    const [csvDay, ...csvCounts] = seen.csv.split("\r\n")[1]!.split(",");
    expect(csvDay).toBe(`"${TODAY}"`);
    expect(csvCounts.length).toBeGreaterThanOrEqual(4);
    expect(csvCounts.every((c) => c === '"0"')).toBe(true);
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
    // The reads of a used key ask its object, through the operator's location (its holder hands
    // back its stock first): the same reads of a key never used made none of these.
    expect(await objectsOf(k.id)).toEqual({ limiter: true, holders: 1 });
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
    const [, marked] = await Promise.allSettled([
      stub.admit(policyOf(stale)),
      markFirstUseOrThrow(env, stale),
    ]);
    // The request itself is refused as the revoked key it is.
    expect(marked.status).toBe("rejected");
    const refusal = (marked as PromiseRejectedResult).reason as ApiError;
    expect([refusal.code, refusal.message]).toEqual([
      "unauthorized",
      "The API key has been revoked.",
    ]);
    expect(await objectsOf(k.id)).toEqual({ limiter: true, holders: 0 });
    const next = await stub.admit(policyOf(stale));
    expect(next.outcome).toBe("revoked");
  });
});

/** env.QUOTA, recording the name and options of every stub asked for. */
function recordingQuota() {
  const asked: { name: string; options: unknown }[] = [];
  const namespace = new Proxy(env.QUOTA, {
    get: (target, prop) =>
      prop === "getByName"
        ? (name: string, options?: DurableObjectNamespaceGetDurableObjectOptions) => {
            asked.push({ name, options });
            return target.getByName(name, options);
          }
        : Reflect.get(target, prop).bind(target),
  });
  return { namespace, asked };
}

describe("a key's region", () => {
  it("is set on create, shown in every key view, changed and cleared by PATCH, and audited", async () => {
    time.now = T0;
    const k = await issueKey("pro", undefined, { region: "weur" });
    expect(k).toMatchObject({ region: "weur" });
    expect(await jsonOf(await keyDetail(k.id))).toMatchObject({ region: "weur" });
    const listed = await jsonOf<{ data: { id: string; region: string | null }[] }>(
      await call("/admin/v1/keys?limit=100", { headers: ADMIN }),
    );
    expect(listed.data.find((l) => l.id === k.id)?.region).toBe("weur");
    expect(await jsonOf(await patchKey(k.id, { region: "apac-se" }))).toMatchObject({
      region: "apac-se",
    });
    expect(await jsonOf(await patchKey(k.id, { name: "renamed" }))).toMatchObject({
      region: "apac-se",
    });
    expect(await jsonOf(await patchKey(k.id, { region: null }))).toMatchObject({ region: null });
    expect((await getKey(env.DB, k.id))?.region).toBeNull();
    const audit = await jsonOf<{ data: { action: string; changes: Record<string, unknown> }[] }>(
      await call(`/admin/v1/audit?keyId=${k.id}`, { headers: ADMIN }),
    );
    expect(audit.data.map((e) => [e.action, e.changes.region])).toEqual([
      ["update", { before: "apac-se", after: null }],
      ["update", undefined],
      ["update", { before: "weur", after: "apac-se" }],
      ["create", { before: null, after: "weur" }],
    ]);
  });

  it("must be one of the location hints: anything else is a 400 that lists them, and changes nothing", async () => {
    time.now = T0;
    const message = `region: must be one of: ${REGIONS.join(", ")}`;
    for (const region of ["mars", "WEUR", "", 3]) {
      const created = await postJson("/admin/v1/keys", { name: "r", plan: "pro", region }, ADMIN);
      expect((await expectError(created, 400, "invalid_request")).message).toContain(message);
    }
    const k = await issueKey("pro", undefined, { region: "oc" });
    const patched = await patchKey(k.id, { region: "atlantis" });
    expect((await expectError(patched, 400, "invalid_request")).message).toContain(message);
    expect((await getKey(env.DB, k.id))?.region).toBe("oc");
    expect(REGIONS).toEqual(
      expect.arrayContaining(["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"]),
    );
  });

  it("is the location hint the Worker gets the key's object with; a key without one gets none", async () => {
    time.now = T0;
    const placed = await issueKey("pro", undefined, { region: "afr" });
    const anywhere = await issueKey("pro");
    const { namespace, asked } = recordingQuota();
    for (const k of [placed, anywhere]) {
      const res = await callWith({ QUOTA: namespace }, "/v1/pets?limit=1", {
        headers: auth(k.key),
      });
      expect(res.status).toBe(200);
    }
    const optionsOf = (id: string) => asked.filter((a) => a.name === id).map((a) => a.options);
    expect(optionsOf(placed.id)).toEqual([{ locationHint: "afr" }]);
    expect(optionsOf(anywhere.id)).toEqual([{}]);
  });

  it("is the location hint a location holder gets the key's object with", async () => {
    time.now = T0;
    const k = await issueKey("pro", undefined, { region: "me" });
    const record = (await getKey(env.DB, k.id))!;
    const holder = env.QUOTA_HOLDER.getByName(holderName(k.id, "DXB"));
    const { namespace, asked } = recordingQuota();
    await runInDurableObject(holder, (instance) => {
      (instance as unknown as { env: Env }).env = { ...env, QUOTA: namespace };
    });
    const answer = await holder.admit(k.id, policyOf(record), record.region);
    // objectsOf sees a location holder of the key once there is one.
    expect(await objectsOf(k.id, ["DXB"])).toEqual({ limiter: true, holders: 1 });
    expect(answer).toMatchObject({ reached: true, decision: { outcome: "allowed" } });
    expect(asked.filter((a) => a.name === k.id).map((a) => a.options)).toContainEqual({
      locationHint: "me",
    });
    expect(asked.every((a) => (a.options as { locationHint?: string }).locationHint === "me")).toBe(
      true,
    );
  });
});
