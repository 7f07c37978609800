// Failing open never lets through a key that was refused: when the key's object cannot be
// reached, an isolate answers a key refused (or banned) in the current window with that refusal,
// whichever tier saw it. A request decided by the key's location holder (a cold isolate's, which
// authenticates and decides in one hop) passes no refusal through the isolate's own memory: the
// holder's memory of it must reach the isolate with its "no decision".
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { holderName, type QuotaHolder } from "../src/objects/quota-holder";
import { freezeBackgroundWork } from "./background-work";
import { auth, BASE, callWith, expectError, issueKey, mockClock, T0 } from "./helpers";

const time = mockClock(T0);

beforeEach(freezeBackgroundWork);

const PER_MINUTE = 10;

/** A request with `key` at an isolate that has not cached it, arriving in `colo`. */
function fromColdIsolate(keyId: string, key: string, colo: string): Promise<Response> {
  forgetKey(keyId);
  return callWith(
    {},
    new Request(`${BASE}/v1/pets?limit=1`, { headers: auth(key), cf: { colo } } as RequestInit),
  );
}

/** Cuts the holder off from the key's object: every call to it fails as an outage would. */
async function cutOffFromKeyObject(keyId: string, colo: string): Promise<void> {
  const unreachable = () => Promise.reject(new Error("Durable Object unreachable"));
  await runInDurableObject(
    env.QUOTA_HOLDER.getByName(holderName(keyId, colo)),
    (holder: QuotaHolder) => {
      const own = holder as unknown as { env: Env };
      own.env = {
        ...own.env,
        QUOTA: {
          getByName: () => ({
            admit: unreachable,
            renewLease: unreachable,
            returnLease: unreachable,
          }),
        } as unknown as Env["QUOTA"],
      };
    },
  );
}

describe("the key's object unreachable from its location holder", () => {
  it("a key refused there in this minute keeps its refusal, not the fallback allowance", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("enterprise", { perMinute: PER_MINUTE, perDay: 1_000 });
    for (let i = 0; i < PER_MINUTE; i++)
      expect((await fromColdIsolate(id, key, "AMS")).status).toBe(200);
    await expectError(await fromColdIsolate(id, key, "AMS"), 429, "rate_limited");
    await cutOffFromKeyObject(id, "AMS");
    const res = await fromColdIsolate(id, key, "AMS");
    await expectError(res, 429, "rate_limited");
    expect(res.headers.get("RateLimit-Policy")).toMatch(/^"fallback"/);
  });

  it("an isolate warm with the key, whose refusals were all decided for it cold, keeps the refusal too", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("enterprise", { perMinute: PER_MINUTE, perDay: 1_000 });
    for (let i = 0; i < PER_MINUTE; i++)
      expect((await fromColdIsolate(id, key, "SIN")).status).toBe(200);
    await expectError(await fromColdIsolate(id, key, "SIN"), 429, "rate_limited");
    await cutOffFromKeyObject(id, "SIN");
    // The isolate cached the key with that refusal: this request goes through its own leases.
    const warm = await callWith(
      {},
      new Request(`${BASE}/v1/pets?limit=1`, {
        headers: auth(key),
        cf: { colo: "SIN" },
      } as RequestInit),
    );
    await expectError(warm, 429, "rate_limited");
    expect(warm.headers.get("RateLimit-Policy")).toMatch(/^"fallback"/);
  });

  it("a key never refused fails open, within the fallback allowance", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("enterprise", { perMinute: PER_MINUTE, perDay: 1_000 });
    expect((await fromColdIsolate(id, key, "FRA")).status).toBe(200);
    await cutOffFromKeyObject(id, "FRA");
    // What the holder has in stock is admitted from it; then it forwards, and gets no decision.
    const policies: (string | null)[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await fromColdIsolate(id, key, "FRA");
      expect(res.status).toBe(200);
      policies.push(res.headers.get("RateLimit-Policy"));
    }
    expect(policies.at(-1)).toMatch(/^"fallback"/);
  });
});

describe("the key's object failing for good, seen from its location holder", () => {
  it("an object that cannot open is no outage: 503, nothing admitted, one error line a minute in the holder", async () => {
    time.now = T0 + 1_000;
    const { id, key } = await issueKey("enterprise", { perMinute: PER_MINUTE, perDay: 1_000 });
    expect((await fromColdIsolate(id, key, "CDG")).status).toBe(200);
    const stub = env.QUOTA.getByName(id);
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("UPDATE schema_version SET version = version + 1");
    });
    await evictDurableObject(stub);
    // The holder's stock of that minute is spent by the next requests; a new minute has none.
    time.now = T0 + 60_000 + 5_000;
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    for (let i = 0; i < 3; i++) {
      const res = await fromColdIsolate(id, key, "CDG");
      await expectError(res, 503, "service_unavailable");
      expect(res.headers.get("Retry-After")).toBe("55");
    }
    const cannotOpen = errors.mock.calls.filter(([line]) =>
      String(line).includes("object cannot open"),
    );
    // Once a minute in each isolate: the holder's and the Worker's (one isolate in this test).
    expect(cannotOpen.length).toBeGreaterThanOrEqual(1);
    expect(cannotOpen.length).toBeLessThanOrEqual(2);
  });
});
