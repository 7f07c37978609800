// QuotaLimiterClient against the real QuotaLimiter and QuotaHolder objects, and against a
// namespace whose objects cannot be reached: what each method does when its call fails.
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../src/lib/errors";
import { holderName } from "../src/objects/quota-holder";
import { locationOf, QuotaLimiterClient } from "../src/objects/quota-limiter-client";
import { LeaseHolder } from "../src/quota/lease-holder";
import type { Policy } from "../src/quota/windows";
import { mockClock, T0 } from "./helpers";

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

const policyOf = (perMinute: number, perDay: number, extra: Partial<Policy> = {}): Policy => ({
  perMinute,
  perDay,
  version: 1,
  revoked: false,
  ...extra,
});

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
  const policy = policyOf(60, 1_000);
  const clientOf = (namespace: Env["QUOTA"], keyId = newKeyId()) =>
    new QuotaLimiterClient(namespace, { id: keyId, region: null }, null, new LeaseHolder());

  it("admit: not reached, not overloaded, no refusal seen; one retry on a retryable error, none otherwise", async () => {
    const plain = unreachable<Env["QUOTA"]>();
    expect(await clientOf(plain.namespace).admit(policy)).toEqual({
      reached: false,
      overloaded: false,
      refusal: null,
    });
    expect(plain.calls()).toBe(1);
    expect(logged.some((l) => l.includes("quota limiter unreachable"))).toBe(true);
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
    });
    expect(logged.some((l) => l.includes("quota limiter overloaded"))).toBe(true);
  });

  it("usage: null (the view says so), not an error", async () => {
    const { namespace } = unreachable<Env["QUOTA"]>();
    await expect(clientOf(namespace).usage(policy)).resolves.toBeNull();
  });

  it.each([
    ["reportOrThrow", (c: QuotaLimiterClient) => c.reportOrThrow(policy)],
    ["configureOrThrow", (c: QuotaLimiterClient) => c.configureOrThrow(policy)],
    ["unbanOrThrow", (c: QuotaLimiterClient) => c.unbanOrThrow(policy)],
    ["saveUsageHistoryOrThrow", (c: QuotaLimiterClient) => c.saveUsageHistoryOrThrow()],
  ] as const)("%s: throws 503 service_unavailable", async (_name, run) => {
    const { namespace } = unreachable<Env["QUOTA"]>();
    const err = await run(clientOf(namespace)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(503);
  });
});

describe("QuotaLimiterClient with the key's object reachable", () => {
  it("usage, report, unban and saveUsageHistory answer what the object holds", async () => {
    const keyId = newKeyId();
    const policy = policyOf(60, 1_000);
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
    const policy = policyOf(60, 1_000);
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

  it("hands this isolate's unused leased permits back before reading", async () => {
    const keyId = newKeyId();
    const policy = policyOf(6_000, 1_000_000);
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
