// A location holder's copy of its key (src/objects/holder-key-record.ts) when reads of it
// overlap a change: the copy is only ever replaced by a newer version of the key, and the role of
// each secret it has met is the one that version gives it.
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { sha256Hex } from "../src/lib/crypto";
import { HeldKeyRecord } from "../src/objects/holder-key-record";
import { holderName } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { PLAN_LIMITS } from "../src/quota/plans";
import { freezeBackgroundWork } from "./background-work";
import {
  ADMIN,
  auth,
  BASE,
  callWith,
  closedGate,
  dbWithReads,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);

beforeEach(freezeBackgroundWork);

/**
 * env.DB, except that each read answers what D1 held when it was asked, only once `gate` opens
 * (a read that was slow to come back).
 */
function slowAnswers(gate: Promise<void>): D1Database {
  return dbWithReads(async (first) => {
    const answer = await first();
    await gate;
    return answer;
  });
}

describe("a location holder's copy of its key, read while the key changes", () => {
  it("a read of an older version that comes back after a newer one is used for its own request only: the old secret keeps the role the newer version gives it", async () => {
    const { id, key } = await issueKey("free");
    const oldHash = await sha256Hex(key);
    const { gate, open } = closedGate();
    const copy = new HeldKeyRecord();
    // A request with the key's secret: its read is slow to come back.
    const slowRead = copy.read(slowAnswers(gate), id, oldHash, T0);
    await Promise.resolve();
    // Meanwhile the key is rolled with no grace (no lease here: nothing is pushed), and a
    // request with the new secret reads the new version.
    const rolled = await postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
    expect(rolled.status).toBe(201);
    const newKey = ((await rolled.json()) as { key: string }).key;
    const newHash = await sha256Hex(newKey);
    const fresh = await copy.read(env.DB, id, newHash, T0 + 10);
    expect(fresh?.secret).toBe("current");
    open();
    const old = await slowRead;
    expect(old?.record.version, "the slow read answers the version before the roll").toBeLessThan(
      fresh!.record.version,
    );
    expect(copy.cached(newHash, T0 + 20)?.record.version).toBe(fresh!.record.version);
    // The old secret is not "current" in the copy (it is unmet there, or met as rolled out).
    expect(copy.cached(oldHash, T0 + 20)?.secret ?? "unmet").not.toBe("current");
  });
});

describe("a change pushed to a location holder holding stock", () => {
  it("makes it forget its copy: the next request there is decided under the new version in one call to the key's object", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("free");
    const fromColdIsolate = () => {
      forgetKey(id);
      return callWith(
        {},
        new Request(`${BASE}/v1/pets?limit=1`, {
          headers: auth(key),
          cf: { colo: "LIS" },
        } as RequestInit),
      );
    };
    expect((await fromColdIsolate()).status).toBe(200);
    const holder = env.QUOTA_HOLDER.getByName(holderName(id, "LIS"));
    expect(await holder.unusedPermits()).toBeGreaterThan(0); // the change is pushed to it
    expect((await patchKey(id, { plan: "pro" })).status).toBe(200);
    const admit = vi.spyOn(QuotaLimiter.prototype, "admit");
    const res = await fromColdIsolate();
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Limit")).toBe(String(PLAN_LIMITS.pro.perMinute));
    expect(admit, "no call on the version before the change").toHaveBeenCalledTimes(1);
  });
});
