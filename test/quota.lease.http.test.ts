// Admission leases through the API: a busy key's requests are decided in the isolate, with
// honest headers, and changes made in this isolate apply from the very next request.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { clock } from "../src/lib/clock";
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

/**
 * The timer that hands a lease back after the response wakes at once, on a clock that has not
 * moved: the lease has not expired, so it stays in the isolate for the test's next request.
 */
function holdLeaseTimers(): void {
  vi.spyOn(clock, "sleep").mockResolvedValue(undefined);
}

/** env.QUOTA, counting the calls that reach the objects (admit and returnLease). */
function countingQuota(): { QUOTA: Env["QUOTA"]; calls: () => number } {
  let calls = 0;
  const getByName = (name: string) => {
    const stub = env.QUOTA.getByName(name) as unknown as Record<
      string,
      (...a: unknown[]) => unknown
    >;
    const get = (_t: object, p: string | symbol) =>
      p === "then" || typeof p !== "string"
        ? undefined
        : (...args: unknown[]) => {
            calls++;
            return stub[p]!(...args);
          };
    return new Proxy({}, { get });
  };
  return { QUOTA: { getByName } as unknown as Env["QUOTA"], calls: () => calls };
}

describe("admission leases through the API", () => {
  it("decides most of a busy key's requests with no call, remaining going down by one each", async () => {
    holdLeaseTimers();
    const { key } = await issueKey("pro");
    const quota = countingQuota();
    const remaining: number[] = [];
    for (let i = 0; i < 50; i++) {
      time.now = T0 + i * 20; // 50 requests a second
      const res = await callWith({ QUOTA: quota.QUOTA }, "/v1/pets?limit=1", {
        headers: auth(key),
      });
      expect(res.status).toBe(200);
      remaining.push(Number(res.headers.get("X-RateLimit-Remaining")));
      await res.arrayBuffer();
    }
    expect(remaining).toEqual(Array.from({ length: 50 }, (_, i) => 299 - i));
    expect(quota.calls()).toBeLessThan(25);
  });

  it("a request its isolate's lease decides never reads where it arrived (request.cf)", async () => {
    holdLeaseTimers();
    const { key } = await issueKey("pro");
    let cfReads = 0;
    /** A request in AMS that counts the reads of its `cf` (a native getter, parsed per read). */
    const located = () => {
      const request = new Request(`${BASE}/v1/pets?limit=1`, { headers: auth(key) });
      Object.defineProperty(request, "cf", {
        get: () => {
          cfReads++;
          return { colo: "AMS" };
        },
      });
      return request;
    };
    for (let i = 0; i < 10; i++) {
      time.now = T0 + i * 20; // busy: the isolate takes a lease of its own
      await (await callWith({}, located())).arrayBuffer();
    }
    const before = cfReads;
    time.now = T0 + 10 * 20;
    const res = await callWith({}, located());
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("289");
    expect(cfReads - before, "decided from the lease: no location looked up").toBe(0);
    expect(before, "the calls that went out found their location").toBeGreaterThan(0);
  });

  it("a quiet key makes one call per request and locks up nothing", async () => {
    const { id, key } = await issueKey("free");
    const quota = countingQuota();
    for (let i = 0; i < 10; i++) {
      time.now = T0 + i * 3_000;
      const res = await callWith({ QUOTA: quota.QUOTA }, "/v1/pets", { headers: auth(key) });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(quota.calls()).toBe(10);
    const detail = (await (await call(`/admin/v1/keys/${id}`, { headers: ADMIN })).json()) as {
      usage: { minute: { count: number } };
    };
    expect(detail.usage.minute.count).toBe(10);
  });

  it("a revocation made in this isolate refuses the very next request, lease or not", async () => {
    holdLeaseTimers();
    const { id, key } = await issueKey("business");
    const quota = countingQuota();
    for (let i = 0; i < 20; i++) {
      const res = await callWith({ QUOTA: quota.QUOTA }, "/v1/pets", { headers: auth(key) });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(quota.calls()).toBeLessThan(20); // a lease was in use
    const revoked = await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN });
    expect(revoked.status).toBe(200);
    await expectError(await call("/v1/pets", { headers: auth(key) }), 401, "unauthorized");
  });

  it("a plan change made in this isolate applies to the very next request, lease or not", async () => {
    holdLeaseTimers();
    const { id, key } = await issueKey("enterprise", { perMinute: 1000, perDay: 100_000 });
    for (let i = 0; i < 20; i++) {
      const res = await call("/v1/pets", { headers: auth(key) });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // Lowered below what this minute has already used: the next request is refused.
    expect((await patchKey(id, { limits: { perMinute: 10, perDay: 100_000 } })).status).toBe(200);
    const res = await call("/v1/pets", { headers: auth(key) });
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("X-RateLimit-Limit")).toBe("10");
  });

  it("hands a lease's unused permits back after the response, when the lease expires", async () => {
    let wake = () => {};
    // The timer sleeps until the test moves the clock past the lease's expiry.
    vi.spyOn(clock, "sleep").mockImplementation(async (ms) => {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      time.now += ms;
    });
    const { id, key } = await issueKey("business");
    // Asked of the object itself: the admin views hand this isolate's lease back before reading.
    const usage = async () => (await env.QUOTA.getByName(id).usage()).minute.count;
    let sent = 0;
    while ((await usage()) === sent) {
      expect(sent).toBeLessThan(20);
      const res = await callWith({}, "/v1/pets", { headers: auth(key) }, { wait: false });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      sent++;
    }
    expect(await usage()).toBeGreaterThan(sent); // a lease's permits are counted as used
    wake();
    await vi.waitFor(async () => expect(await usage()).toBe(sent));
  });
});
