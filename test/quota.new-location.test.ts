// A key's first request in a location where it was never used, while it is in use in another
// (docs/quotas.md, "A new location"): what that request waits for, in what order, and why no
// less. The isolate is new to the key too (as it is in a location the key never used), so the
// key's holder there authenticates it and decides it in one local hop.
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { HeldKeyRecord } from "../src/objects/holder-key-record";
import { holderName } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { freezeBackgroundWork } from "./background-work";
import {
  ADMIN,
  auth,
  BASE,
  callWith,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  preparingDb,
  T0,
} from "./helpers";

const time = mockClock(T0);
let seq = 0;

beforeEach(freezeBackgroundWork);

/** `key`'s request to the first page in location `colo`, as an isolate new to the key serves it. */
function fromColdIsolate(
  keyId: string,
  key: string,
  colo: string,
  bindings: { [K in keyof Env]?: unknown } = {},
): Promise<Response> {
  forgetKey(keyId);
  return callWith(
    bindings,
    new Request(`${BASE}/v1/pets?limit=1`, {
      headers: auth(key, { "CF-Connecting-IP": `203.0.113.${++seq % 250}` }),
      cf: { colo },
    } as RequestInit),
  );
}

/**
 * Records, in order, the steps a request's tiers take from here on: the key read from D1 at a
 * location holder ("read" when asked, "read done" when it answers) and every call to the key's
 * object ("object <method>"); and the isolate's own key reads and holder calls.
 */
function recordSteps() {
  const steps: string[] = [];
  const read = HeldKeyRecord.prototype.read;
  vi.spyOn(HeldKeyRecord.prototype, "read").mockImplementation(function (
    this: HeldKeyRecord,
    ...args: Parameters<HeldKeyRecord["read"]>
  ) {
    steps.push("read");
    return read.apply(this, args).then((match) => {
      steps.push("read done");
      return match;
    });
  });
  for (const method of ["admit", "renewLease", "returnLease"] as const) {
    const original = QuotaLimiter.prototype[method];
    vi.spyOn(QuotaLimiter.prototype, method).mockImplementation(function (
      this: QuotaLimiter,
      ...args: unknown[]
    ) {
      steps.push(`object ${method}`);
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as never);
  }
  const keyDb = preparingDb((sql) => sql.includes("api_keys"));
  const holderCalls: string[] = [];
  const isolate = {
    DB: keyDb.db,
    QUOTA_HOLDER: {
      getByName: (name: string) =>
        new Proxy(env.QUOTA_HOLDER.getByName(name), {
          get: (target, prop) => {
            const value = Reflect.get(target, prop);
            if (typeof prop !== "string" || prop === "then" || typeof value !== "function")
              return value;
            return (...args: unknown[]) => {
              holderCalls.push(`${prop} ${name.slice(name.indexOf("@") + 1)}`);
              return Reflect.apply(value, target, args);
            };
          },
        }),
    },
    QUOTA: {
      getByName: (name: string) => {
        steps.push("isolate calls the key's object");
        return env.QUOTA.getByName(name);
      },
    },
  };
  return { steps, isolate, isolateKeyReads: keyDb.prepared, holderCalls };
}

/** A free key in use in AMS: three requests there, its holder holding stock. */
async function inUseInAms() {
  const issued = await issueKey("free");
  time.now = T0 + 1_000;
  for (let i = 0; i < 3; i++) {
    expect((await fromColdIsolate(issued.id, issued.key, "AMS")).status).toBe(200);
    time.now += 1_500;
  }
  const ams = env.QUOTA_HOLDER.getByName(holderName(issued.id, "AMS"));
  expect(await ams.unusedPermits()).toBeGreaterThan(0);
  return issued;
}

describe("a key's first request in a location where it was never used, while in use elsewhere", () => {
  it("waits for one local hop, then the key read from D1 at the holder, then one call to the key's object: nothing else", async () => {
    const { id, key } = await inUseInAms();
    const { steps, isolate, isolateKeyReads, holderCalls } = recordSteps();
    const res = await fromColdIsolate(id, key, "SIN", isolate);
    expect(res.status).toBe(200);
    // 3 in AMS, this one: the minute's count, with AMS's unused stock counted as used.
    expect(Number(res.headers.get("X-RateLimit-Remaining"))).toBeLessThanOrEqual(56);
    // The isolate: one call to the key's holder in SIN, no D1 read, no call of its own far away.
    expect(holderCalls).toEqual(["authenticateAndAdmit SIN"]);
    expect(isolateKeyReads).toEqual([]);
    // The holder: the key's record, then the request forwarded (asking for its stock in the same
    // call); the key's object is called once, and only once the secret is known to be usable.
    // AMS held all of the bound as its stock for the minute: the answer says the key's object has
    // it share the bound, and the holder, once it has answered, asks for its stock (in the
    // background: answered once AMS kept a shared stock).
    expect(steps).toEqual(["read", "read done", "object admit", "object renewLease"]);
    const sin = env.QUOTA_HOLDER.getByName(holderName(id, "SIN"));
    await vi.waitFor(async () => expect(await sin.unusedPermits()).toBeGreaterThan(0));
    // Its next request in SIN, from another new isolate: authenticated from the holder's copy,
    // no D1 read anywhere, and decided from SIN's stock: no far call.
    steps.length = 0;
    isolateKeyReads.length = 0;
    time.now += 1_000;
    expect((await fromColdIsolate(id, key, "SIN", isolate)).status).toBe(200);
    expect(steps).toEqual([]);
    expect(isolateKeyReads).toEqual([]);
  });

  it("a secret refused there gets its 401 with no call to the key's object: nothing is counted", async () => {
    const { id, key } = await inUseInAms();
    const roll = await postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
    expect(roll.status).toBe(201);
    const rolled = ((await roll.json()) as { key: string }).key;
    const counted = async () => {
      const { minute, day } = await env.QUOTA.getByName(id).usage();
      return { minute: minute.count, day: day.count };
    };
    const before = await counted();
    const { steps } = recordSteps();

    // The secret the roll ended, in a location where the key was never used.
    const old = await expectError(await fromColdIsolate(id, key, "SIN"), 401, "unauthorized");
    expect(old.message).toMatch(/rolled/);
    // A made-up secret under the key's genuine id and tag: a guess.
    const forged = `pet_test_${"A".repeat(43)}${rolled.slice("pet_test_".length + 43)}`;
    await expectError(await fromColdIsolate(id, forged, "NRT"), 401, "unauthorized");
    // A disabled key.
    expect((await patchKey(id, { enabled: false })).status).toBe(200);
    const disabled = await expectError(
      await fromColdIsolate(id, rolled, "GRU"),
      401,
      "unauthorized",
    );
    expect(disabled.message).toMatch(/disabled/);

    expect(steps.filter((s) => s.startsWith("object") || s.startsWith("isolate"))).toEqual([]);
    expect(steps.filter((s) => s === "read")).toHaveLength(3);
    expect((await patchKey(id, { enabled: true })).status).toBe(200);
    expect(await counted()).toEqual(before);
  });
});
