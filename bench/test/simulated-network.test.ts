import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { KEY_CACHE_TTL_MS, KEY_REFRESH_AFTER_MS } from "../../src/auth/key-cache";
import { auth, BASE, createPets, fixClock, issueKey, T0 } from "../../test/helpers";
import worker from "../api/index";
import { keyIdOfObject } from "../api/simulated-network";

/** The bench entry Worker's fetch (bench/api/index.ts) with `vars` over the test env. */
async function send(vars: Record<string, string>, path: string, init: RequestInit = {}) {
  const ctx = createExecutionContext();
  const t0 = performance.now();
  // An incoming request, as the runtime hands it to the Worker.
  const request = new Request(`${BASE}${path}`, init) as Request<
    unknown,
    IncomingRequestCfProperties
  >;
  const res = await worker.fetch(request, { ...env, ...vars }, ctx);
  const ms = performance.now() - t0;
  await waitOnExecutionContext(ctx);
  return { res, ms };
}

const DELAYS = { BENCH_LIMITER_RTT_MS: "60", BENCH_D1_RTT_MS: "40", PAGE_CACHE_EPOCH: "sim" };

describe("the bench's simulated network (BENCH_*_RTT_MS)", () => {
  it("off (0, the default): real bindings, no X-Bench-Calls", async () => {
    const { key } = await issueKey();
    const { res } = await send({}, "/v1/pets?limit=1", { headers: auth(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get("X-Bench-Calls")).toBeNull();
  });

  it("on: each limiter call and D1 query waits its round trip, and the response counts them", async () => {
    const { key } = await issueKey();
    const headers = auth(key);
    // Cold: the key is read from D1 (1 query), its first use is marked beside its admission
    // (1 query), the page is read (1 query), one limiter call.
    const cold = await send(DELAYS, "/v1/pets?limit=1", { headers });
    expect(cold.res.status).toBe(200);
    expect(cold.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=1, d1=3, d1-pets=1, local=0, forwarded=0, background=0",
    );
    // The limiter call and the page read overlap for a key with room; the key read comes first.
    expect(cold.ms).toBeGreaterThanOrEqual(40 + 60 - 5);
    // Two pets make the first page full; once read, it is cached: no D1 query at all.
    const pet = (await (
      await send(DELAYS, "/v1/pets", {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json", "Idempotency-Key": "sim-1" },
        body: '{"name":"Sim","categoryId":1}',
      })
    ).res.json()) as { id: number };
    await send(DELAYS, "/v1/pets", {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json" },
      body: '{"name":"Sim2","categoryId":1}',
    });
    const reads = await send(DELAYS, "/v1/pets?limit=1", { headers });
    expect(reads.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=1, d1=1, d1-pets=1, local=0, forwarded=0, background=0",
    ); // full now: stored
    const warm = await send(DELAYS, "/v1/pets?limit=1", { headers });
    expect(warm.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=1, d1=0, d1-pets=0, local=0, forwarded=0, background=0",
    );
    expect(warm.ms).toBeGreaterThanOrEqual(60 - 5);
    // An idempotent create (replayed here): one limiter call, one D1 batch.
    const replay = await send(DELAYS, "/v1/pets", {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json", "Idempotency-Key": "sim-1" },
      body: '{"name":"Sim","categoryId":1}',
    });
    expect(replay.res.headers.get("Idempotent-Replayed")).toBe("true");
    expect(((await replay.res.json()) as { id: number }).id).toBe(pet.id);
    expect(replay.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=1, d1=1, d1-pets=1, local=0, forwarded=0, background=0",
    );
  });

  it("a key in steady use is re-read after its response: no request waits for D1 to authenticate", async () => {
    const time = fixClock(T0);
    const { key } = await issueKey();
    const headers = auth(key);
    // D1 slow, the limiter not delayed (and not counted): a request that waited for a D1 read would take ≥ 400 ms.
    const slowD1 = {
      BENCH_LIMITER_RTT_MS: "0",
      BENCH_D1_RTT_MS: "400",
      PAGE_CACHE_EPOCH: "sim-refresh",
    };
    await createPets(key, [
      { name: "Refresh1", categoryId: 1 },
      { name: "Refresh2", categoryId: 1 },
    ]);
    await send(slowD1, "/v1/pets?limit=1", { headers }); // caches the key and the full page
    time.now += KEY_REFRESH_AFTER_MS;
    const refreshing = await send(slowD1, "/v1/pets?limit=1", { headers });
    expect(refreshing.res.status).toBe(200);
    // It started the key's re-read (one D1 query, not of pets) but did not wait for it.
    expect(refreshing.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=0, d1=1, d1-pets=0, local=0, forwarded=0, background=0",
    );
    expect(refreshing.ms).toBeLessThan(400);
    // Past the first read's 30 s the re-read record is still warm: no D1 at all.
    time.now += KEY_CACHE_TTL_MS - KEY_REFRESH_AFTER_MS + 1_000;
    const warm = await send(slowD1, "/v1/pets?limit=1", { headers });
    expect(warm.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=0, d1=0, d1-pets=0, local=0, forwarded=0, background=0",
    );
    expect(warm.ms).toBeLessThan(400);
    // A key idle for longer than its entry's life waits for its read, as before.
    time.now += KEY_CACHE_TTL_MS;
    const idle = await send(slowD1, "/v1/pets?limit=1", { headers });
    expect(idle.res.headers.get("X-Bench-Calls")).toBe(
      "limiter=0, d1=1, d1-pets=0, local=0, forwarded=0, background=0",
    );
    expect(idle.ms).toBeGreaterThanOrEqual(400 - 5);
  });

  it("a request marked with a location is decided by the key's holder there (BENCH_LOCAL_RTT_MS)", async () => {
    const time = fixClock(T0);
    const { key } = await issueKey();
    const located = { ...DELAYS, BENCH_LOCAL_RTT_MS: "20", PAGE_CACHE_EPOCH: "sim-located" };
    const headers = auth(key, { "X-Bench-Location": "AMS" });
    // The holder in AMS has no stock yet: it forwards the request to the key's object.
    const first = await send(located, "/v1/pets?limit=1", { headers });
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get("X-Bench-Calls")).toMatch(
      /^limiter=0, .*, local=1, forwarded=1, background=0$/,
    );
    expect(first.ms).toBeGreaterThanOrEqual(20 + 60 - 5);
    // A quiet key's next request there is answered from the stock it took: one local hop.
    time.now += 2_000;
    const next = await send(located, "/v1/pets?limit=1", { headers });
    expect(next.res.headers.get("X-Bench-Calls")).toMatch(
      /^limiter=0, .*, local=1, forwarded=0, background=0$/,
    );
    // Without the header: no location, the key's object decides (as in tests and before).
    time.now += 2_000;
    const unmarked = await send(located, "/v1/pets?limit=1", { headers: auth(key) });
    expect(unmarked.res.headers.get("X-Bench-Calls")).toMatch(
      /^limiter=1, .*, local=0, forwarded=0, background=0$/,
    );
  });

  it("logs each key's Durable Object requests by key, holder calls included (GET /__bench/key-calls)", async () => {
    fixClock(T0);
    const { key, id } = await issueKey();
    const other = await issueKey();
    const located = { ...DELAYS, BENCH_LOCAL_RTT_MS: "20", PAGE_CACHE_EPOCH: "sim-key-calls" };
    const before = Date.now();
    await send(located, "/v1/pets?limit=1", { headers: auth(key, { "X-Bench-Location": "AMS" }) });
    await send(located, "/v1/pets?limit=1", { headers: auth(key) }); // no location: the object
    await send(located, "/v1/pets?limit=1", { headers: auth(other.key) });
    const after = Date.now();
    const { res } = await send(located, "/__bench/key-calls");
    const logs = (await res.json()) as Record<string, [number, string][]>;
    // The first went to its holder in AMS (`<key id>@AMS`), the second to the key's object.
    expect(logs[id]?.map(([, hop]) => hop)).toEqual(["local", "limiter"]);
    for (const [at] of logs[id] ?? []) {
      expect(at).toBeGreaterThanOrEqual(before);
      expect(at).toBeLessThanOrEqual(after);
    }
    expect(logs[other.id]?.map(([, hop]) => hop)).toEqual(["limiter"]);
  });

  it("names the key an object belongs to: its QuotaLimiter (the key id) or a holder (<id>@<colo>)", () => {
    expect(keyIdOfObject("key_abc")).toBe("key_abc");
    expect(keyIdOfObject("key_abc@AMS")).toBe("key_abc");
    expect(keyIdOfObject(undefined)).toBeNull();
    expect(keyIdOfObject("")).toBeNull();
  });

  it("a limiter call a request starts and does not wait for (a lease renewal) is counted as background", async () => {
    fixClock(T0);
    const { key } = await issueKey();
    const vars = { ...DELAYS, PAGE_CACHE_EPOCH: "sim-background" };
    const seen: string[] = [];
    // Busy in this isolate: a lease comes with the second request, and once half of it is
    // used, a request admitted from it sends a renewal it does not wait for.
    for (let i = 0; i < 6; i++) {
      const { res } = await send(vars, "/v1/pets?limit=1", { headers: auth(key) });
      expect(res.status).toBe(200);
      seen.push(res.headers.get("X-Bench-Calls")?.replace(/, d1=.*, local/, ", local") ?? "");
    }
    expect(seen.slice(0, 2)).toEqual([
      "limiter=1, local=0, forwarded=0, background=0",
      "limiter=1, local=0, forwarded=0, background=0",
    ]);
    expect(seen).toContain("limiter=1, local=0, forwarded=0, background=1");
  });

  it("refused outside local development, and with a malformed round trip: 500 with a clear body", async () => {
    const { key } = await issueKey();
    const refused: Record<string, string>[] = [
      { ENVIRONMENT: "production", BENCH_D1_RTT_MS: "30" },
      { ENVIRONMENT: "staging" },
      { BENCH_D1_RTT_MS: "-1" },
      { BENCH_LIMITER_RTT_MS: "1.5" },
    ];
    for (const vars of refused) {
      const { res } = await send(vars, "/v1/pets?limit=1", { headers: auth(key) });
      expect(res.status).toBe(500);
      const body = (await res.json()) as { code: string; message: string; status: number };
      expect(body).toMatchObject({ code: "internal_error", status: 500 });
      expect(body.message).toMatch(
        /^Bench misconfigured: (the bench Worker runs locally only|BENCH_)/,
      );
    }
  });
});
