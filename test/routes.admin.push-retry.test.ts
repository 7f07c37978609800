// A change to a used key is saved in D1, then pushed to the key's quota object. When the push
// fails the admin API answers 503 ("saved but not yet enforced everywhere; repeat the request"):
// repeating the request must push it, even though D1 has nothing left to change. Otherwise the
// object keeps the old policy, and every caller whose copy of the key is older than the change
// (a location holder's copy has no age limit) keeps being admitted under it.
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { forgetKey, KEY_CACHE_TTL_MS } from "../src/auth/key-cache";
import { getKey, type KeyRecord, policyOf } from "../src/db/keys";
import { HELD_KEY_MAX_AGE_MS } from "../src/objects/holder-key-record";
import { freezeBackgroundWork } from "./background-work";
import {
  ADMIN,
  auth,
  BASE,
  call,
  callWith,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  T0,
} from "./helpers";

const time = mockClock(T0);

/** env.QUOTA, except that every push of a policy (`configure`) fails as an unreachable object. */
function quotaFailingPushes(): typeof env.QUOTA {
  return new Proxy(env.QUOTA, {
    get: (target, prop) =>
      prop === "getByName"
        ? (name: string, options?: DurableObjectNamespaceGetDurableObjectOptions) => {
            const stub = target.getByName(name, options);
            return new Proxy(stub, {
              get: (s, p) =>
                p === "configure"
                  ? () => Promise.reject(new Error("Durable Object unreachable"))
                  : Reflect.get(s, p),
            });
          }
        : Reflect.get(target, prop).bind(target),
  });
}

/** A key used once (so its quota object exists and D1 knows it), and its record as used. */
async function usedKey(): Promise<{ id: string; record: KeyRecord }> {
  time.now = T0;
  const k = await issueKey("pro");
  expect((await call("/v1/pets?limit=1", { headers: auth(k.key) })).status).toBe(200);
  const record = (await getKey(env.DB, k.id))!;
  expect(record.firstUsedAt).not.toBeNull();
  return { id: k.id, record };
}

/** What the key's object decides for a caller still holding `record` (made before the change). */
async function decisionFor(record: KeyRecord) {
  return (await env.QUOTA.getByName(record.id).admit(policyOf(record))).outcome;
}

describe("a change whose push failed, repeated", () => {
  it("revocation: the 503 says it is saved; the repeat pushes it, and the object refuses older copies", async () => {
    const { id, record } = await usedKey();
    const revoke = { method: "DELETE", headers: ADMIN };
    const failed = await callWith({ QUOTA: quotaFailingPushes() }, `/admin/v1/keys/${id}`, revoke);
    await expectError(failed, 503, "service_unavailable");
    expect((await getKey(env.DB, id))?.revokedAt).not.toBeNull();
    // The push failed: the object still admits a caller holding the record from before.
    expect(await decisionFor(record)).toBe("allowed");
    expect((await call(`/admin/v1/keys/${id}`, revoke)).status).toBe(200);
    expect(await decisionFor(record)).toBe("revoked");
  });

  it("disabling: the repeated PATCH pushes it although D1 has nothing left to change", async () => {
    const { id, record } = await usedKey();
    const body = { enabled: false };
    const failed = await callWith({ QUOTA: quotaFailingPushes() }, `/admin/v1/keys/${id}`, {
      method: "PATCH",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    await expectError(failed, 503, "service_unavailable");
    expect(await decisionFor(record)).toBe("allowed");
    expect((await patchKey(id, body)).status).toBe(200);
    expect(await decisionFor(record)).toBe("revoked");
  });
});

/** A request with `key` arriving in location `colo` at an isolate that has not cached the key. */
function fromColdIsolate(keyId: string, key: string, colo: string): Promise<Response> {
  forgetKey(keyId);
  return callWith(
    {},
    new Request(`${BASE}/v1/pets?limit=1`, { headers: auth(key), cf: { colo } } as RequestInit),
  );
}

describe("a location holder's copy of a key the change never reached", () => {
  beforeEach(freezeBackgroundWork);

  it("is used for no longer than an isolate's record: HELD_KEY_MAX_AGE_MS is KEY_CACHE_TTL_MS", () => {
    expect(HELD_KEY_MAX_AGE_MS).toBe(KEY_CACHE_TTL_MS);
  });

  it("a roll with no grace whose push failed (answered 201): the old secret is refused there once the copy is HELD_KEY_MAX_AGE_MS old", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("free");
    expect((await fromColdIsolate(id, key, "AMS")).status).toBe(200);
    const rolled = await callWith(
      { QUOTA: quotaFailingPushes() },
      new Request(`${BASE}/admin/v1/keys/${id}/roll`, {
        method: "POST",
        headers: { ...ADMIN, "Content-Type": "application/json" },
        body: JSON.stringify({ gracePeriodSeconds: 0 }),
      }),
    );
    expect(rolled.status).toBe(201);
    // The key's object still has the old version, so its answers do not refresh the copy.
    time.now = T0 + 1_000 + HELD_KEY_MAX_AGE_MS - 1;
    expect((await fromColdIsolate(id, key, "AMS")).status).toBe(200);
    time.now = T0 + 1_000 + HELD_KEY_MAX_AGE_MS;
    const old = await expectError(await fromColdIsolate(id, key, "AMS"), 401, "unauthorized");
    expect(old.message).toMatch(/rolled/);
  });

  it("a revocation whose push failed (503) and was not repeated: refused there once the copy is HELD_KEY_MAX_AGE_MS old", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("free");
    expect((await fromColdIsolate(id, key, "IAD")).status).toBe(200);
    const failed = await callWith({ QUOTA: quotaFailingPushes() }, `/admin/v1/keys/${id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    await expectError(failed, 503, "service_unavailable");
    time.now = T0 + 1_000 + HELD_KEY_MAX_AGE_MS;
    const refused = await expectError(await fromColdIsolate(id, key, "IAD"), 401, "unauthorized");
    expect(refused.message).toMatch(/revoked/);
  });

  it("a copy a cold isolate is handed ages from the holder's read: that isolate, warm since, refuses the revocation when the holder does", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("free");
    expect((await fromColdIsolate(id, key, "SYD")).status).toBe(200);
    const failed = await callWith({ QUOTA: quotaFailingPushes() }, `/admin/v1/keys/${id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    await expectError(failed, 503, "service_unavailable");
    // A cold isolate there is handed the holder's copy, read before the revocation, and keeps it.
    time.now = T0 + 1_000 + HELD_KEY_MAX_AGE_MS - 1;
    expect((await fromColdIsolate(id, key, "SYD")).status).toBe(200);
    time.now = T0 + 1_000 + HELD_KEY_MAX_AGE_MS;
    const warm = new Request(`${BASE}/v1/pets?limit=1`, {
      headers: auth(key),
      cf: { colo: "SYD" },
    } as RequestInit);
    const refused = await expectError(await callWith({}, warm), 401, "unauthorized");
    expect(refused.message).toMatch(/revoked/);
  });
});
