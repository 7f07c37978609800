// A change to a used key is saved in D1, then pushed to the key's quota object. When the push
// fails the admin API answers 503 ("saved but not yet enforced everywhere; repeat the request"):
// repeating the request must push it, even though D1 has nothing left to change. Otherwise the
// object keeps the old policy, and every caller whose copy of the key is older than the change
// (a location holder's copy has no age limit) keeps being admitted under it.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getKey, type KeyRecord } from "../src/db/keys";
import { policyOf } from "../src/objects/quota-limiter-client";
import {
  ADMIN,
  auth,
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
