// QuotaLimiterClient against the real QuotaLimiter and QuotaHolder objects, and against a
// namespace whose objects cannot be reached: what each method does when its call fails.
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { clock } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import { ApiError } from "../src/lib/errors";
import {
  type HolderAnswer,
  type HolderAuthentication,
  holderName,
} from "../src/objects/quota-holder";
import {
  type AdmitResult,
  authenticateAndAdmitInLocation,
  authenticateInLocation,
  locationOf,
} from "../src/objects/quota-holder-client";
import { QuotaLimiterClient, unusedKeyUsage } from "../src/objects/quota-limiter-client";
import { LeaseHolder } from "../src/quota/lease-holder";
import { freezeBackgroundWork } from "./background-work";
import { issueKey, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);
let seq = 0;

// The failures below log on purpose; keep them out of the test output (and inspect them).
let logged: string[] = [];
beforeEach(() => {
  logged = [];
  const capture = (...args: unknown[]) => void logged.push(args.map(String).join(" "));
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(capture);
});
afterEach(() => vi.restoreAllMocks());

/** An error as a Durable Object call throws it, with Cloudflare's marks. */
function objectError(marks: { overloaded?: boolean; retryable?: boolean } = {}): Error {
  return Object.assign(new Error("the object cannot be reached"), marks);
}

/** A namespace whose every object call fails with `error()`, counting the calls made. */
function unreachable<T>(error: () => Error = () => objectError()) {
  let calls = 0;
  const getByName = () =>
    new Proxy(
      {},
      {
        get: (_t, p) =>
          p === "then" || typeof p !== "string"
            ? undefined
            : async () => {
                calls++;
                throw error();
              },
      },
    );
  return { namespace: { getByName } as unknown as T, calls: () => calls };
}

const newKeyId = () => `limiter_client_${++seq}`;

describe("QuotaLimiterClient when the key's object cannot be reached", () => {
  const policy = policyWith(60, 1_000);
  const clientOf = (namespace: Env["QUOTA"], keyId = newKeyId()) =>
    new QuotaLimiterClient(namespace, { id: keyId, region: null }, null, new LeaseHolder());

  it("admit: not reached, not overloaded, no refusal seen; one retry on a retryable error, none otherwise", async () => {
    const plain = unreachable<Env["QUOTA"]>();
    const keyId = newKeyId();
    expect(await clientOf(plain.namespace, keyId).admit(policy)).toEqual({
      reached: false,
      overloaded: false,
      refusal: null,
      persistentFailure: null,
    });
    expect(plain.calls()).toBe(1);
    expect(logged.some((l) => l.includes("quota limiter unreachable") && l.includes(keyId))).toBe(
      true,
    );
    const retryable = unreachable<Env["QUOTA"]>(() => objectError({ retryable: true }));
    expect((await clientOf(retryable.namespace).admit(policy)).reached).toBe(false);
    expect(retryable.calls()).toBe(2);
  });

  it("admit: an overloaded object is said to be overloaded", async () => {
    const { namespace } = unreachable<Env["QUOTA"]>(() => objectError({ overloaded: true }));
    expect(await clientOf(namespace).admit(policy)).toEqual({
      reached: false,
      overloaded: true,
      refusal: null,
      persistentFailure: null,
    });
    expect(logged.some((l) => l.includes("quota limiter overloaded"))).toBe(true);
  });

  it.each([
    [
      "cannot open",
      () =>
        new Error(
          "object cannot open: its stored schema version 11 is newer than this code reads (10)",
        ),
    ],
    [
      "throws from its own code",
      () => Object.assign(new Error("TypeError: x is undefined"), { remote: true }),
    ],
  ])(
    "admit: an object that %s fails for good: said so with the cause, not retried, not logged per call",
    async (_, error) => {
      const failing = unreachable<Env["QUOTA"]>(error);
      const result = await clientOf(failing.namespace).admit(policy);
      expect(result).toEqual({
        reached: false,
        overloaded: false,
        refusal: null,
        persistentFailure: error().message,
      });
      expect(failing.calls()).toBe(1);
      expect(logged).toEqual([]); // the answer to it logs, once a minute (quota/fail-open.ts)
    },
  );

  it("usage: null (the view says so), not an error", async () => {
    const { namespace } = unreachable<Env["QUOTA"]>();
    const keyId = newKeyId();
    await expect(clientOf(namespace, keyId).usage(policy)).resolves.toBeNull();
    expect(logged.some((l) => l.includes(keyId) && l.includes("cannot be reached"))).toBe(true);
  });

  it.each([
    ["reportOrThrow", (c: QuotaLimiterClient) => c.reportOrThrow(policy)],
    ["configureOrThrow", (c: QuotaLimiterClient) => c.configureOrThrow(policy)],
    ["unbanOrThrow", (c: QuotaLimiterClient) => c.unbanOrThrow(policy)],
    ["saveUsageHistoryOrThrow", (c: QuotaLimiterClient) => c.saveUsageHistoryOrThrow()],
  ] as const)("%s: throws 503 service_unavailable", async (_name, run) => {
    const { namespace } = unreachable<Env["QUOTA"]>();
    const keyId = newKeyId();
    const err = await run(clientOf(namespace, keyId)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(503);
    expect(logged.some((l) => l.includes(keyId) && l.includes("cannot be reached"))).toBe(true);
  });
});

describe("QuotaLimiterClient with the key's object reachable", () => {
  it("usage, report, unban and saveUsageHistory answer what the object holds", async () => {
    const keyId = newKeyId();
    const policy = policyWith(60, 1_000);
    const client = new QuotaLimiterClient(env.QUOTA, { id: keyId, region: null });
    for (let i = 0; i < 3; i++) await env.QUOTA.getByName(keyId).admit(policy);
    expect((await client.usage(policy))?.minute.count).toBe(3);
    const report = await client.reportOrThrow(policy);
    expect(report.usage.minute.count).toBe(3);
    expect(report.days.map((d) => d.admitted)).toEqual([3]);
    expect((await client.unbanOrThrow(policy)).bannedUntilBefore).toBeNull();
    expect((await client.saveUsageHistoryOrThrow()).map((d) => d.admitted)).toEqual([3]);
  });
});

describe("QuotaLimiterClient's usage reads are exact as far as its isolate and location go", () => {
  it("hands the location holder's stock back before reading", async () => {
    const keyId = newKeyId();
    const policy = policyWith(60, 1_000);
    time.now = T0 + 1_000;
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "FRA"));
    const answer = await holder.admit(keyId, policy);
    expect(answer.reached && answer.decision.outcome).toBe("allowed");
    expect(await holder.unusedPermits()).toBeGreaterThan(0);
    const client = new QuotaLimiterClient(
      env.QUOTA,
      { id: keyId, region: null },
      { holders: env.QUOTA_HOLDER, name: "FRA" },
      new LeaseHolder(),
    );
    expect((await client.usage(policy))?.minute.count).toBe(1);
    expect(await holder.unusedPermits()).toBe(0);
  });

  it("a location holder whose stock cannot be handed back: the read still answers, and it is logged with the key", async () => {
    const keyId = newKeyId();
    const policy = policyWith(60, 1_000);
    time.now = T0 + 1_000;
    const holders = counted(env.QUOTA_HOLDER, ["giveBack"]);
    const client = new QuotaLimiterClient(
      env.QUOTA,
      { id: keyId, region: null },
      { holders: holders.namespace, name: "FRA" },
      new LeaseHolder(),
    );
    const first = await client.admit(policy);
    expect(first.reached && first.decision.outcome).toBe("allowed");
    const read = await client.usage(policy);
    expect(holders.calls.giveBack).toBe(1);
    expect(read?.minute.limit).toBe(60);
    expect(
      logged.filter(
        (l) => l.includes("could not hand a location holder's stock back") && l.includes(keyId),
      ),
    ).toHaveLength(1);
  });

  it("hands this isolate's unused leased permits back before reading", async () => {
    const keyId = newKeyId();
    const policy = policyWith(6_000, 1_000_000);
    const leases = new LeaseHolder();
    const client = new QuotaLimiterClient(env.QUOTA, { id: keyId, region: null }, null, leases);
    let admitted = 0;
    for (let i = 0; i < 200 && leases.unusedPermits === 0; i++) {
      time.now += 50;
      const result = await client.admit(policy);
      expect(result.reached).toBe(true);
      if (result.reached) result.afterResponse?.catch(() => undefined);
      if (result.reached && result.decision.outcome === "allowed") admitted++;
    }
    expect(leases.unusedPermits).toBeGreaterThan(0);
    expect((await env.QUOTA.getByName(keyId).usage()).minute.count).toBeGreaterThan(admitted);
    expect((await client.usage(policy))?.minute.count).toBe(admitted);
    expect(leases.unusedPermits).toBe(0);
  });
});

describe("locationOf", () => {
  const holders = env.QUOTA_HOLDER;
  const withColo = (colo: unknown) =>
    new Request("https://api.example.com/", { cf: { colo } } as RequestInit);
  it("is the request's Cloudflare location, or null when it names none", () => {
    expect(locationOf(withColo("FRA"), holders)).toEqual({ holders, name: "FRA" });
    expect(locationOf(withColo(""), holders)).toBeNull();
    expect(locationOf(withColo(7), holders)).toBeNull();
    expect(locationOf(new Request("https://api.example.com/"), holders)).toBeNull();
  });
});

describe("authenticating at the key's holder in the request's location", () => {
  it("found (decided or not), unknown, or unread when the holder cannot be reached", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const location = { holders: env.QUOTA_HOLDER, name: "AMS" };
    expect(await authenticateInLocation(location, id, await sha256Hex(`${key}x`))).toEqual({
      outcome: "unknown",
    });
    const found = await authenticateInLocation(location, id, hash);
    expect(found.outcome === "found" && found.match.record.id).toBe(id);
    expect(found.outcome === "found" && found.admission).toBeNull();
    const decided = await authenticateAndAdmitInLocation(location, id, hash);
    expect(decided.outcome === "found" && decided.match.record.id).toBe(id);
    const admission = decided.outcome === "found" ? decided.admission : null;
    expect(admission?.reached && admission.decision.outcome).toBe("allowed");
    expect(admission?.reached && admission.afterResponse).toBeNull();
    const gone = unreachable<Env["QUOTA_HOLDER"]>();
    const away = { holders: gone.namespace, name: "AMS" };
    expect(await authenticateInLocation(away, id, hash)).toEqual({ outcome: "unread" });
    expect(logged.some((l) => l.includes("reading the key from D1") && l.includes(id))).toBe(true);
    expect(await authenticateAndAdmitInLocation(away, id, hash)).toEqual({ outcome: "unread" });
  });
});

describe("unusedKeyUsage", () => {
  it("counts nothing, with the policy's limits and the current windows' ends", () => {
    const policy = policyWith(60, 1_000);
    const now = T0 + 12_345;
    const usage = unusedKeyUsage(policy, now);
    expect(usage).toEqual({
      policy,
      minute: { count: 0, limit: 60, resetAt: Math.floor(now / 60_000) * 60_000 + 60_000 },
      day: {
        count: 0,
        limit: 1_000,
        resetAt: Math.floor(now / 86_400_000) * 86_400_000 + 86_400_000,
      },
      bannedUntil: null,
    });
  });
});

/** The real namespace, counting calls per method, with `failing` methods rejecting. */
function counted<T extends { getByName: (name: string) => unknown }>(
  real: T,
  failing: string[] = [],
) {
  const calls: Record<string, number> = {};
  const getByName = (name: string) => {
    const stub = real.getByName(name) as Record<string, (...a: unknown[]) => Promise<unknown>>;
    return new Proxy(
      {},
      {
        get: (_t, p) =>
          p === "then" || typeof p !== "string"
            ? undefined
            : async (...args: unknown[]) => {
                calls[p] = (calls[p] ?? 0) + 1;
                if (failing.includes(p)) throw objectError();
                return stub[p]!(...args);
              },
      },
    );
  };
  return { namespace: { getByName } as unknown as T, calls };
}

describe("QuotaLimiterClient's calls", () => {
  it("a plain request goes to the location holder; a lease request goes to the key's object through it, with its stock", async () => {
    const holders = counted(env.QUOTA_HOLDER);
    const client = new QuotaLimiterClient(
      env.QUOTA,
      { id: newKeyId(), region: null },
      { holders: holders.namespace, name: "FRA" },
      new LeaseHolder(),
    );
    time.now = T0 + 1_000;
    const first = await client.admit(policyWith(60, 1_000));
    expect(first.reached && first.decision.outcome).toBe("allowed");
    expect(holders.calls.admit).toBe(1);
    // Simultaneous requests of a busy key: a lease (only the key's object grants one) is taken,
    // asked through the location holder, which hands its own stock back in the same call.
    const busyHolders = counted(env.QUOTA_HOLDER);
    const objects = counted(env.QUOTA);
    const leases = new LeaseHolder();
    const busyKey = newKeyId();
    const busy = new QuotaLimiterClient(
      objects.namespace,
      { id: busyKey, region: null },
      { holders: busyHolders.namespace, name: "FRA" },
      leases,
    );
    const results = await Promise.all(
      Array.from({ length: 20 }, () => busy.admit(policyWith(6_000, 1_000_000))),
    );
    for (const r of results) if (r.reached) r.afterResponse?.catch(() => undefined);
    expect(results.every((r) => r.reached && r.decision.outcome === "allowed")).toBe(true);
    expect(busyHolders.calls.admit).toBeGreaterThan(0);
    expect(busyHolders.calls.admitForIsolate).toBeGreaterThan(0);
    expect(objects.calls.admit ?? 0, "not straight to the key's object").toBe(0);
    expect(leases.unusedPermits).toBeGreaterThan(0);
    const holder = env.QUOTA_HOLDER.getByName(holderName(busyKey, "FRA"));
    expect(await holder.unusedPermits(), "the holder's stock went back").toBe(0);
  });

  it("a location holder that cannot be reached: the key's object decides, and it is logged", async () => {
    const keyId = newKeyId();
    const { namespace } = unreachable<Env["QUOTA_HOLDER"]>();
    const client = new QuotaLimiterClient(
      env.QUOTA,
      { id: keyId, region: null },
      { holders: namespace, name: "FRA" },
      new LeaseHolder(),
    );
    const result = await client.admit(policyWith(60, 1_000));
    expect(result.reached && result.decision.outcome).toBe("allowed");
    expect((await env.QUOTA.getByName(keyId).usage()).minute.count).toBe(1);
    expect(logged.some((l) => l.includes("location holder unreachable") && l.includes(keyId))).toBe(
      true,
    );
  });

  it("a location holder without a decision (its call to the object failed): not reached, with its refusal, and the object is not asked", async () => {
    const keyId = newKeyId();
    const refusal = { outcome: "key_banned" as const, retryAt: T0 + 900_000 };
    const withoutDecision: HolderAnswer = { reached: false, overloaded: true, refusal };
    const holders = {
      getByName: (name: string) => {
        const real = env.QUOTA_HOLDER.getByName(name);
        return {
          admit: async () => withoutDecision,
          authenticateAndAdmit: async (id: string, hash: string) => {
            const said = (await real.authenticate(id, hash)) as HolderAuthentication;
            return said.outcome === "found" ? { ...said, answer: withoutDecision } : said;
          },
        };
      },
    } as unknown as Env["QUOTA_HOLDER"];
    const objects = counted(env.QUOTA);
    const client = new QuotaLimiterClient(
      objects.namespace,
      { id: keyId, region: null },
      { holders, name: "FRA" },
      new LeaseHolder(),
    );
    // A holder of the release before says nothing of a failure for good: taken as none.
    expect(await client.admit(policyWith(60, 1_000))).toEqual({
      reached: false,
      overloaded: true,
      refusal,
      persistentFailure: null,
    });
    expect(objects.calls.admit).toBeUndefined();
    const { id, key } = await issueKey("free");
    const said = await authenticateAndAdmitInLocation(
      { holders, name: "FRA" },
      id,
      await sha256Hex(key),
    );
    expect(said.outcome === "found" && said.admission).toEqual({
      reached: false,
      overloaded: true,
      refusal,
    });
  });

  it("a location holder whose key's object fails for good says so, and the client passes it on (the object is not asked)", async () => {
    const persistentFailure =
      "object cannot open: its stored schema version 11 is newer than this code reads (10)";
    const withoutDecision: HolderAnswer = {
      reached: false,
      overloaded: false,
      refusal: null,
      persistentFailure,
    };
    const holders = {
      getByName: () => ({ admit: async () => withoutDecision }),
    } as unknown as Env["QUOTA_HOLDER"];
    const objects = counted(env.QUOTA);
    const client = new QuotaLimiterClient(
      objects.namespace,
      { id: newKeyId(), region: null },
      { holders, name: "FRA" },
      new LeaseHolder(),
    );
    expect(await client.admit(policyWith(60, 1_000))).toEqual({
      reached: false,
      overloaded: false,
      refusal: null,
      persistentFailure,
    });
    expect(objects.calls.admit).toBeUndefined();
  });
});

describe("QuotaLimiterClient's work after the response", () => {
  const busy = policyWith(6_000, 1_000_000);

  /** A client of a new key in an isolate of its own (its own lease holder), with no location. */
  function isolateClient(namespace: Env["QUOTA"]) {
    const keyId = newKeyId();
    const leases = new LeaseHolder();
    const client = new QuotaLimiterClient(namespace, { id: keyId, region: null }, null, leases);
    return { keyId, leases, client };
  }

  /** Admits requests of a busy key 50 ms apart until `done()`; returns the results and the count admitted. */
  async function admitUntil(client: QuotaLimiterClient, done: () => boolean) {
    const results: AdmitResult[] = [];
    for (let i = 0; i < 200 && !done(); i++) {
      time.now += 50;
      results.push(await client.admit(busy));
    }
    expect(done(), "the condition was reached within 200 requests").toBe(true);
    const admitted = results.filter((r) => r.reached && r.decision.outcome === "allowed").length;
    return { results, admitted };
  }

  it("a request that took a lease leaves the hand-back of its unused permits at expiry, and its response's work lasts until it is made", async () => {
    // The lease's expiry passes at once; the hand-back's call waits for the test to let it go.
    vi.spyOn(clock, "sleep").mockImplementation(async (ms) => void (time.now += ms));
    let letGo: () => void = () => undefined;
    const handBack = new Promise<void>((resolve) => (letGo = resolve));
    let entered: () => void = () => undefined;
    const handBackEntered = new Promise<void>((resolve) => (entered = resolve));
    let returned = false;
    const objects = {
      getByName: (name: string) =>
        new Proxy(env.QUOTA.getByName(name), {
          get: (target, p) =>
            p === "returnLease"
              ? async (...args: unknown[]) => {
                  entered();
                  await handBack;
                  await target.returnLease(...(args as [never]));
                  returned = true;
                }
              : Reflect.get(target, p),
        }),
    } as unknown as Env["QUOTA"];
    const { keyId, leases, client } = isolateClient(objects);
    const stub = env.QUOTA.getByName(keyId);
    const { results, admitted } = await admitUntil(client, () => leases.unusedPermits > 0);
    const leaseTaken = results.at(-1)!;
    expect(leaseTaken.reached && leaseTaken.afterResponse).toBeInstanceOf(Promise);
    const work = (leaseTaken as Extract<AdmitResult, { reached: true }>).afterResponse!;
    let settled = false;
    void work.then(() => (settled = true));
    await handBackEntered;
    expect(settled, "the work waits for the hand-back").toBe(false);
    expect((await stub.usage()).minute.count).toBeGreaterThan(admitted);
    letGo();
    await work;
    expect(returned, "the work ends once the hand-back is made").toBe(true);
    expect((await stub.usage()).minute.count).toBe(admitted);
  });

  it("a renewal that fails: the request is still answered, and the failure is logged with the key", async () => {
    freezeBackgroundWork();
    const objects = counted(env.QUOTA, ["renewLease"]);
    const { keyId, client } = isolateClient(objects.namespace);
    const { results } = await admitUntil(client, () => (objects.calls.renewLease ?? 0) > 0);
    const renewing = results.at(-1)!;
    expect(renewing.reached && renewing.decision.outcome).toBe("allowed");
    await (renewing as Extract<AdmitResult, { reached: true }>).afterResponse;
    expect(
      logged.filter((l) => l.includes("could not renew a lease") && l.includes(keyId)),
    ).toHaveLength(1);
  });

  it("a hand-back that fails is logged with the key, and its permits go back with the next call", async () => {
    freezeBackgroundWork();
    const failing = ["returnLease"];
    const objects = counted(env.QUOTA, failing);
    const { keyId, leases, client } = isolateClient(objects.namespace);
    const { admitted } = await admitUntil(client, () => leases.unusedPermits > 0);
    // A usage read hands the isolate's unused permits back first; that call fails.
    expect((await client.usage(busy))?.minute.count).toBeGreaterThan(admitted);
    expect(objects.calls.returnLease).toBe(1);
    expect(
      logged.filter((l) => l.includes("could not give a lease back") && l.includes(keyId)),
    ).toHaveLength(1);
    failing.splice(0);
    expect((await client.usage(busy))?.minute.count).toBe(admitted);
  });
});
