/// <reference types="vite/client" />
// The @animal-store/client package (packages/client/src) against the app in workerd, and its
// retry policy against stub servers. e2e/client-package.test.mjs checks the packed package itself.
import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  AnimalStoreError,
  ApiError,
  createAnimalStoreClient,
  NetworkError,
  parseErrorBody,
  RateLimitError,
  RETRY_DEFAULTS,
  retryAfterMs,
  retryingFetch,
  TimeoutError,
} from "../packages/client/src/index";
import { USAGE_READS_PER_MINUTE } from "../src/routes/usage/routes";
import { BASE, createPets, fixClock, issueKey } from "./helpers";

// Read at transform time by Vite; line breaks do not split a phrase.
const clientReadme = Object.values(
  import.meta.glob<string>("../packages/client/README.md", {
    query: "?raw",
    import: "default",
    eager: true,
  }),
)
  .join("")
  .replace(/\s+/g, " ");

const viaWorker: typeof fetch = (input, init) => exports.default.fetch(new Request(input, init));

describe("client against the app", () => {
  it("creates, lists, pages and fetches pets, and exposes the rate-limit headers", async () => {
    // A fixed instant in the middle of a minute: Remaining is compared across requests.
    fixClock(Date.UTC(2030, 2, 4, 9, 20, 30));
    const k = await issueKey("pro");
    const store = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    expect(store.rateLimit).toBeUndefined();
    const rex = await store.createPet(
      { name: "Client Rex", categoryId: 7, status: "pending" },
      { idempotencyKey: crypto.randomUUID() },
    );
    expect(rex).toMatchObject({
      id: expect.any(Number),
      name: "Client Rex",
      categoryId: 7,
      status: "pending",
    });
    expect(store.rateLimit).toMatchObject({
      limit: 300,
      remaining: 299,
      reset: expect.any(Number),
    });
    expect(store.rateLimit?.policy).toContain('"minute";q=300;w=60');

    await createPets(
      k.key,
      Array.from({ length: 4 }, (_, i) => ({ name: `p${i}`, categoryId: 1, status: "pending" })),
    );
    const first = await store.listPets({ status: "pending", limit: 2 });
    expect(first.pets).toHaveLength(2);
    expect(first.nextCursor).toEqual(expect.any(String));
    expect(first.rateLimit?.remaining).toBe(294); // 1 create + 4 seeded + this list

    const names: string[] = [];
    for await (const p of store.listAllPets({ status: "pending", limit: 2 })) names.push(p.name);
    expect(names).toEqual(["Client Rex", "p0", "p1", "p2", "p3"]);
    expect(store.rateLimit?.remaining).toBe(291); // three pages

    expect(await store.getPet(rex.id)).toEqual(rex);
  });

  it("parses both windows of the IETF headers on every response, and reads usage() for free", async () => {
    fixClock(Date.UTC(2030, 2, 4, 9, 21, 30));
    const k = await issueKey("enterprise", { perMinute: 50, perDay: 500 });
    const store = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    const page = await store.listPets({ limit: 1 });
    expect(page.rateLimit?.windows).toEqual({
      minute: { limit: 50, remaining: 49, resetSeconds: expect.any(Number), windowSeconds: 60 },
      day: { limit: 500, remaining: 499, resetSeconds: expect.any(Number), windowSeconds: 86400 },
    });
    expect(page.rateLimit?.windows.day?.resetSeconds).toBeGreaterThan(0);
    const usage = await store.usage();
    expect(usage.windows.day).toMatchObject({ limit: 500, used: 1, remaining: 499 });
    expect(usage.days).toHaveLength(30);
    expect(usage.key.id).toBe(k.id);
    // usage() was not counted, and its headers are the key's windows as they stand.
    expect(store.rateLimit?.windows.day?.remaining).toBe(499);
    await store.listPets({ limit: 1 });
    expect(store.rateLimit?.windows.minute?.remaining).toBe(48);
  });

  it("keeps the key's windows in rateLimit: a usage-read refusal (its own limit) does not replace them", async () => {
    fixClock(Date.UTC(2030, 2, 4, 9, 22, 30));
    const k = await issueKey("enterprise", { perMinute: 50, perDay: 500 });
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      maxRetries: 0,
    });
    await store.listPets({ limit: 1 });
    for (let i = 0; i < USAGE_READS_PER_MINUTE; i++) await store.usage();
    const refused = await store.usage().catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 429, code: "rate_limited" });
    // That 429's headers describe the usage reads' own window (30 a minute), not the key's.
    expect(store.rateLimit).toMatchObject({ limit: 50, remaining: 49 });
    expect(store.rateLimit?.windows.minute).toMatchObject({ limit: 50, remaining: 49 });
  });

  it("replays a create with the same Idempotency-Key instead of creating a second pet", async () => {
    const k = await issueKey("pro");
    const store = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    const idempotencyKey = crypto.randomUUID();
    const a = await store.createPet({ name: "Once", categoryId: 3 }, { idempotencyKey });
    const b = await store.createPet({ name: "Once", categoryId: 3 }, { idempotencyKey });
    expect(b).toEqual(a);
    expect(a.status).toBe("available");
  });

  it("throws ApiError (formerly AnimalStoreError) with the body's code and the request id", async () => {
    const k = await issueKey("pro");
    const store = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    const missing = await store.getPet(987654321).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ApiError);
    expect(missing).toBeInstanceOf(AnimalStoreError);
    expect(missing).not.toBeInstanceOf(RateLimitError);
    expect(missing).toMatchObject({ status: 404, code: "not_found", retryAfter: undefined });
    const { requestId, message } = missing as ApiError;
    expect(requestId).toMatch(/^[\w-]{8,}$/);
    expect(String(missing)).toBe(`ApiError: 404 not_found: ${message} (request ${requestId})`);
    const bad = await store.createPet({ name: "", categoryId: 1 }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, code: "invalid_request" });
    const wrongKey = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: "pet_test_nope",
      fetch: viaWorker,
    });
    await expect(wrongKey.listPets()).rejects.toMatchObject({ status: 401, code: "unauthorized" });
  });

  it("gives a create without idempotencyKey a key of its own, so a lost answer is retried into the same pet", async () => {
    const k = await issueKey("pro");
    const keys: Array<string | null> = [];
    let lose = true;
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      sleep: async () => undefined,
      fetch: async (input, init) => {
        const req = new Request(input, init);
        keys.push(req.headers.get("Idempotency-Key"));
        const res = await viaWorker(req);
        if (lose && req.method === "POST") {
          lose = false; // the pet was created, and the answer never reaches the client
          await res.arrayBuffer();
          throw new TypeError("fetch failed");
        }
        return res;
      },
    });
    const pet = await store.createPet({ name: "Lost answer", categoryId: 4 });
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(keys[1]).toBe(keys[0]);
    const named: string[] = [];
    for await (const p of store.listAllPets({ limit: 100 }))
      if (p.name === "Lost answer") named.push(String(p.id));
    expect(named).toEqual([String(pet.id)]); // one pet, the one returned
    await store.createPet({ name: "Another", categoryId: 4 });
    expect(keys.at(-1)).not.toBe(keys[0]); // each create gets a key of its own
  });

  it("waits Retry-After on 429, then succeeds", async () => {
    const time = fixClock(Date.UTC(2027, 2, 1, 10, 0, 0));
    const k = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
      time.now += ms; // time passes only when the client waits
    };
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      sleep,
      baseDelayMs: 100,
    });
    await store.listPets();
    time.now += 1_000; // 1 s into the minute: the next request is over the per-minute limit
    await store.listPets();
    expect(waits).toEqual([59_000]); // Retry-After (59 s) beats the 100 ms backoff step
  });

  it("throws a 429 whose Retry-After is longer than maxRetryAfterMs as a RateLimitError, without waiting", async () => {
    fixClock(Date.UTC(2027, 2, 1, 10, 0, 0));
    const k = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    const waits: number[] = [];
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      sleep: async (ms) => void waits.push(ms),
      maxRetryAfterMs: 10_000,
    });
    await store.listPets();
    const err = await store.listPets().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 429, code: "rate_limited", retryAfter: 60 });
    expect(String(err)).toMatch(/^RateLimitError: 429 rate_limited: .*retry after 60 s\)$/);
    expect(waits).toEqual([]);
    expect(store.rateLimit).toMatchObject({ limit: 1, remaining: 0 });
  });

  it("never retries a ban before it ends: thrown at once, or waited out in full when allowed", async () => {
    const time = fixClock(Date.UTC(2027, 2, 1, 11, 0, 5));
    const k = await issueKey("enterprise", { perMinute: 1, perDay: 1000 });
    const list = () =>
      viaWorker(`${BASE}/v1/pets`, { headers: { Authorization: `Bearer ${k.key}` } });
    expect((await list()).status).toBe(200);
    for (let i = 0; i < 11; i++) await (await list()).arrayBuffer(); // 10 refusals tolerated, then the ban
    const banned = await list();
    expect(((await banned.json()) as { code: string }).code).toBe("key_banned");
    const banSeconds = Number(banned.headers.get("Retry-After"));
    expect(banSeconds).toBeGreaterThan(60);

    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
      time.now += ms;
    };
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      sleep,
    });
    const err = await store.listPets().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ code: "key_banned", retryAfter: banSeconds });
    expect(waits).toEqual([]); // default maxRetryAfterMs (60 s) < the ban: not waited, not retried

    const patient = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      sleep,
      maxRetryAfterMs: 20 * 60_000,
    });
    const page = await patient.listPets();
    expect(page.pets).toBeInstanceOf(Array);
    expect(waits).toEqual([banSeconds * 1000]); // the whole ban, then one request that succeeds
  });
});

describe("retry policy", () => {
  const answering =
    (status: number, headers: Record<string, string> = {}, body = "{}"): typeof fetch =>
    async () =>
      new Response(body, { status, headers });
  const counted = (inner: typeof fetch) => {
    const calls: Array<{ method: string; body: string | null }> = [];
    const f: typeof fetch = async (input, init) => {
      const req = new Request(input, init);
      calls.push({ method: req.method, body: req.body ? await req.text() : null });
      return inner(input, init);
    };
    return { calls, f };
  };
  /** Fails `failures` times as a dropped connection does (undici's TypeError), then answers 200. */
  const droppingThen = (failures: number): typeof fetch => {
    let left = failures;
    return async () => {
      if (left-- > 0) throw new TypeError("fetch failed", { cause: { code: "ECONNRESET" } });
      return new Response("[]", { status: 200 });
    };
  };
  /** Never answers; rejects with the signal's reason when the attempt is abandoned. */
  const hanging: typeof fetch = (_input, init) =>
    new Promise((_, reject) => {
      init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true });
    });
  const noSleep = async () => undefined;
  const url = "https://x.example/v1/pets";

  afterEach(() => {
    vi.useRealTimers();
  });

  it("retries a 429 and a 503 with Retry-After for a read, up to maxRetries", async () => {
    for (const status of [429, 503]) {
      const get = counted(answering(status, { "Retry-After": "1" }));
      const waits: number[] = [];
      const res = await retryingFetch({
        fetch: get.f,
        maxRetries: 3,
        sleep: async (ms) => void waits.push(ms),
        random: () => 0,
      })(url);
      expect(res.status).toBe(status);
      expect(get.calls).toHaveLength(4);
      expect(waits).toEqual([1000, 1000, 1000]);
    }
  });

  it("waits a full-jitter backoff: random × min(maxBackoffMs, baseDelayMs × 2^retry)", async () => {
    const waitsWith = async (random: () => number, maxBackoffMs = 60_000) => {
      const waits: number[] = [];
      await retryingFetch({
        fetch: answering(429), // no Retry-After: the backoff alone decides
        maxRetries: 4,
        baseDelayMs: 100,
        maxBackoffMs,
        random,
        sleep: async (ms) => void waits.push(ms),
      })(url);
      return waits;
    };
    expect(await waitsWith(() => 0.5)).toEqual([50, 100, 200, 400]);
    expect(await waitsWith(() => 0)).toEqual([0, 0, 0, 0]);
    expect(await waitsWith(() => 0.5, 250)).toEqual([50, 100, 125, 125]);
  });

  it("never waits less than Retry-After, however small the jitter", async () => {
    const waits: number[] = [];
    await retryingFetch({
      fetch: answering(429, { "Retry-After": "3" }),
      maxRetries: 2,
      baseDelayMs: 10_000,
      random: () => 0.01,
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(waits).toEqual([3000, 3000]);
  });

  it("does not retry a 503 without Retry-After", async () => {
    const get = counted(answering(503));
    const res = await retryingFetch({ fetch: get.f, sleep: noSleep })(url);
    expect(res.status).toBe(503);
    expect(get.calls).toHaveLength(1);
  });

  it("retries a 429 without Retry-After with the backoff, but never a ban without one", async () => {
    const limited = counted(answering(429, {}, '{"code":"rate_limited"}'));
    await retryingFetch({ fetch: limited.f, maxRetries: 2, sleep: noSleep })(url);
    expect(limited.calls).toHaveLength(3);
    const banned = counted(
      answering(429, {}, '{"code":"key_banned","message":"banned","status":429}'),
    );
    const res = await retryingFetch({ fetch: banned.f, maxRetries: 2, sleep: noSleep })(url);
    expect(banned.calls).toHaveLength(1);
    expect(await res.json()).toMatchObject({ code: "key_banned" }); // the body is still readable
  });

  it("retries network errors for a read with the backoff, then answers", async () => {
    const waits: number[] = [];
    const res = await retryingFetch({
      fetch: droppingThen(2),
      baseDelayMs: 100,
      random: () => 0.5,
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(res.status).toBe(200);
    expect(waits).toEqual([50, 100]);
  });

  it("throws a NetworkError with the last failure as its cause when every attempt failed", async () => {
    const err = await retryingFetch({ fetch: droppingThen(99), maxRetries: 2, sleep: noSleep })(
      url,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect(err).not.toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ name: "NetworkError", method: "GET", url, attempts: 3 });
    expect((err as Error).cause).toBeInstanceOf(TypeError);
    expect((err as Error).message).toBe(
      `GET ${url} failed after 3 attempts: fetch failed (ECONNRESET)`,
    );
  });

  it("never resends a POST without Idempotency-Key after a network error, and resends one with it", async () => {
    const once = counted(droppingThen(1));
    const err = await retryingFetch({ fetch: once.f, sleep: noSleep })(url, {
      method: "POST",
      body: "{}",
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "NetworkError", attempts: 1 });
    expect(once.calls).toHaveLength(1);
    const keyed = counted(droppingThen(1));
    const res = await retryingFetch({ fetch: keyed.f, sleep: noSleep })(url, {
      method: "POST",
      body: '{"name":"Rex"}',
      headers: { "Idempotency-Key": "k1" },
    });
    expect(res.status).toBe(200);
    expect(keyed.calls).toEqual(Array(2).fill({ method: "POST", body: '{"name":"Rex"}' }));
  });

  it("abandons an attempt after timeoutMs, retries it, then throws a TimeoutError", async () => {
    const signals: AbortSignal[] = [];
    const err = await retryingFetch({
      fetch: (input, init) => {
        if (init?.signal) signals.push(init.signal);
        return hanging(input, init);
      },
      timeoutMs: 20,
      maxRetries: 1,
      sleep: noSleep,
    })(url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toBeInstanceOf(NetworkError);
    expect(err).toMatchObject({ name: "TimeoutError", attempts: 2 });
    expect((err as Error).message).toMatch(/failed after 2 attempts: no answer within 20 ms$/);
    expect(signals.map((s) => s.aborted)).toEqual([true, true]);
  });

  it("bounds by timeoutMs the error body it reads to decide a retry (a 429 whose body stalls)", async () => {
    // Headers, then a body that never ends but for the attempt's signal, as fetch's does.
    const stalled = counted(async (_input, init) => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"code":'));
          const signal = init?.signal;
          signal?.addEventListener("abort", () => controller.error(signal.reason), { once: true });
        },
      });
      return new Response(body, { status: 429 });
    });
    const res = await retryingFetch({
      fetch: stalled.f,
      timeoutMs: 20,
      maxRetries: 1,
      sleep: noSleep,
    })(url);
    expect(res.status).toBe(429);
    expect(stalled.calls).toHaveLength(2); // the first attempt was given up, then retried
  });

  it("has a default timeout of RETRY_DEFAULTS.timeoutMs per attempt", async () => {
    vi.useFakeTimers();
    const pending = retryingFetch({ fetch: hanging, maxRetries: 0 })(url).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(RETRY_DEFAULTS.timeoutMs - 1);
    let settled = false;
    void pending.then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await pending).toBeInstanceOf(TimeoutError);
  });

  it("rejects with the caller's own reason when the caller aborts an attempt, without retrying", async () => {
    for (const maxRetries of [0, 3]) {
      const get = counted(hanging);
      const controller = new AbortController();
      const pending = retryingFetch({ fetch: get.f, sleep: noSleep, maxRetries })(url, {
        signal: controller.signal,
      });
      setTimeout(() => controller.abort(new Error("caller stopped")), 10);
      await expect(pending).rejects.toThrow(/^caller stopped$/);
      expect(get.calls).toHaveLength(1);
    }
  });

  it("never retries a POST without Idempotency-Key, whatever the answer", async () => {
    for (const [status, body] of [
      [429, "{}"],
      [503, "{}"],
    ] as const) {
      const post = counted(answering(status, { "Retry-After": "1" }, body));
      const res = await retryingFetch({ fetch: post.f, maxRetries: 2, sleep: noSleep })(url, {
        method: "POST",
        body: "{}",
      });
      expect(res.status).toBe(status);
      expect(post.calls).toHaveLength(1);
    }
  });

  it("retries a POST with Idempotency-Key on 429 and 503, sending the same body", async () => {
    for (const [status, body] of [
      [429, "{}"],
      [503, "{}"],
    ] as const) {
      const post = counted(answering(status, { "Retry-After": "2" }, body));
      const waits: number[] = [];
      await retryingFetch({
        fetch: post.f,
        maxRetries: 2,
        baseDelayMs: 10,
        sleep: async (ms) => void waits.push(ms),
      })(url, { method: "POST", body: '{"name":"Rex"}', headers: { "Idempotency-Key": "k1" } });
      expect(post.calls).toEqual(Array(3).fill({ method: "POST", body: '{"name":"Rex"}' }));
      expect(waits).toEqual([2000, 2000]); // Retry-After beats the 10 ms backoff
    }
  });

  it("does not retry a 409, which the API never sends to a create (not even with an in-flight code)", async () => {
    const post = counted(answering(409, {}, '{"code":"idempotency_key_in_flight"}'));
    const res = await retryingFetch({ fetch: post.f, sleep: noSleep })(url, {
      method: "POST",
      body: "{}",
      headers: { "Idempotency-Key": "k1" },
    });
    expect(post.calls).toHaveLength(1);
    expect(await res.json()).toEqual({ code: "idempotency_key_in_flight" }); // the body is still readable
  });

  it("retries a POST Request object with Idempotency-Key, resending its body (cloned)", async () => {
    const post = counted(answering(429));
    const req = new Request(url, {
      method: "POST",
      body: '{"name":"Rex"}',
      headers: { "Idempotency-Key": "k1" },
    });
    await retryingFetch({ fetch: post.f, maxRetries: 2, sleep: noSleep })(req);
    expect(post.calls).toEqual(Array(3).fill({ method: "POST", body: '{"name":"Rex"}' }));
  });

  it("returns the response instead of retrying when the body is a stream that cannot be replayed", async () => {
    for (const status of [429, 503]) {
      const post = counted(answering(status, { "Retry-After": "1" }));
      const body = new ReadableStream({
        start: (c) => (c.enqueue(new TextEncoder().encode("{}")), c.close()),
      });
      const res = await retryingFetch({ fetch: post.f, sleep: noSleep })(url, {
        method: "PUT",
        body,
        headers: { "Idempotency-Key": "k1" },
      });
      expect(res.status).toBe(status);
      expect(post.calls).toHaveLength(1);
    }
  });

  it("does not retry other statuses", async () => {
    for (const status of [200, 400, 401, 404, 500]) {
      const get = counted(answering(status));
      expect((await retryingFetch({ fetch: get.f, sleep: noSleep })(url)).status).toBe(status);
      expect(get.calls).toHaveLength(1);
    }
  });

  it("returns a Retry-After longer than maxRetryAfterMs (a ban) instead of blocking or retrying early", async () => {
    for (const options of [{}, { maxRetryAfterMs: 60_000 }, { maxDelayMs: 60_000 }]) {
      const banned = counted(answering(429, { "Retry-After": "61" }));
      const res = await retryingFetch({ fetch: banned.f, sleep: noSleep, ...options })(url);
      expect(res.status).toBe(429);
      expect(banned.calls).toHaveLength(1);
    }
    const waits: number[] = [];
    const allowed = counted(answering(429, { "Retry-After": "61" }));
    await retryingFetch({
      fetch: allowed.f,
      maxRetries: 1,
      maxRetryAfterMs: 61_000,
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(waits).toEqual([61_000]);
  });

  it("reads Retry-After as seconds or an HTTP date, and treats anything else as absent", () => {
    const now = Date.UTC(2030, 0, 1, 0, 0, 0);
    expect(retryAfterMs(new Headers({ "Retry-After": "7" }), now)).toBe(7000);
    expect(retryAfterMs(new Headers({ "Retry-After": "Tue, 01 Jan 2030 00:00:30 GMT" }), now)).toBe(
      30_000,
    );
    expect(retryAfterMs(new Headers({ "Retry-After": "Mon, 31 Dec 2029 00:00:00 GMT" }), now)).toBe(
      0,
    );
    expect(retryAfterMs(new Headers({ "Retry-After": "soon" }), now)).toBeUndefined();
    expect(retryAfterMs(new Headers(), now)).toBeUndefined();
  });

  it("backs off when Retry-After is unreadable", async () => {
    const waits: number[] = [];
    await retryingFetch({
      fetch: answering(429, { "Retry-After": "soon" }),
      maxRetries: 1,
      baseDelayMs: 100,
      random: () => 0.5,
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(waits).toEqual([50]);
  });

  it("stops waiting when the AbortSignal fires, with its reason", async () => {
    const get = counted(answering(503, { "Retry-After": "30" }));
    const controller = new AbortController();
    const started = Date.now();
    const pending = retryingFetch({ fetch: get.f })(url, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("stop")), 20);
    await expect(pending).rejects.toThrow("stop");
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(get.calls).toHaveLength(1);
  });

  it("passes the AbortSignal through the client to fetch", async () => {
    let seen: AbortSignal | undefined;
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: "k",
      fetch: async (input, init) => {
        seen = new Request(input, init).signal;
        return new Response("[]", { headers: { "Content-Type": "application/json" } });
      },
    });
    const controller = new AbortController();
    await store.listPets({}, { signal: controller.signal });
    expect(seen?.aborted).toBe(false);
    controller.abort(new Error("cancelled"));
    expect(seen?.aborted).toBe(true);
    const aborted = AbortSignal.abort(new Error("already"));
    await expect(store.getPet(1, { signal: aborted })).rejects.toThrow();
  });

  it("types limit as a number and Idempotency-Key as optional, and sends yours or a new one", async () => {
    const sent: Request[] = [];
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: "k",
      fetch: async (input, init) => {
        const req = new Request(input, init);
        sent.push(req);
        return req.method === "POST"
          ? new Response('{"id":1,"name":"Rex","categoryId":1,"status":"available"}', {
              status: 201,
              headers: { "Content-Type": "application/json" },
            })
          : new Response("[]", { headers: { "Content-Type": "application/json" } });
      },
    });
    // Never called: `npm run typecheck` fails if a string limit type-checks.
    // @ts-expect-error limit is a number, not a string
    const _stringLimit = () => store.listPets({ limit: "50" });
    await store.listPets({ limit: 50 });
    await store.createPet({ name: "Rex", categoryId: 1 });
    await store.createPet({ name: "Rex", categoryId: 1 }, { idempotencyKey: "retry-1" });
    expect(sent.map((r) => r.method)).toEqual(["GET", "POST", "POST"]);
    expect(new URL(sent[0]!.url).searchParams.get("limit")).toBe("50");
    expect(sent[1]!.headers.get("Idempotency-Key")).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[2]!.headers.get("Idempotency-Key")).toBe("retry-1");
  });
});

describe("errors", () => {
  const response = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), { status, headers });

  it("reads the default body and RFC 9457 problem details alike", () => {
    expect(parseErrorBody({ code: "not_found", message: "Pet 7 not found", status: 404 })).toEqual({
      code: "not_found",
      message: "Pet 7 not found",
      status: 404,
      type: undefined,
    });
    const problem = {
      type: "https://api.example.com/problems/not_found",
      title: "Not found",
      status: 404,
      detail: "Pet 7 not found",
      code: "not_found",
    };
    expect(parseErrorBody(problem)).toEqual({
      code: "not_found",
      message: "Pet 7 not found",
      status: 404,
      type: problem.type,
    });
    const { detail: _, ...titleOnly } = problem;
    expect(parseErrorBody(titleOnly).message).toBe("Not found");
    for (const notABody of ["<html>Bad gateway</html>", null, undefined, [1], 42])
      expect(parseErrorBody(notABody)).toEqual({
        code: undefined,
        message: undefined,
        status: undefined,
        type: undefined,
      });
    expect(parseErrorBody({ code: 7, message: "", status: "404" })).toEqual({
      code: undefined,
      message: undefined,
      status: undefined,
      type: undefined,
    });
  });

  it("makes the same ApiError from either body shape, with the request id and Retry-After", () => {
    const headers = { "X-Request-Id": "req-123", "Retry-After": "42" };
    const plain = new RateLimitError(
      response(429, { code: "rate_limited", message: "Slow down", status: 429 }, headers),
      { code: "rate_limited", message: "Slow down", status: 429 },
    );
    const problemBody = {
      type: "https://api.example.com/problems/rate_limited",
      title: "Too many requests",
      status: 429,
      detail: "Slow down",
      code: "rate_limited",
    };
    const problem = new RateLimitError(
      response(429, problemBody, { ...headers, "Content-Type": "application/problem+json" }),
      problemBody,
    );
    for (const e of [plain, problem]) {
      expect(e).toMatchObject({
        name: "RateLimitError",
        code: "rate_limited",
        status: 429,
        message: "Slow down",
        requestId: "req-123",
        retryAfter: 42,
      });
      expect(e.toString()).toBe(
        "RateLimitError: 429 rate_limited: Slow down (request req-123, retry after 42 s)",
      );
    }
    expect(problem.type).toBe(problemBody.type);
    expect(plain.type).toBeUndefined();
  });

  it("keeps the Response and body off the printed fields, so an uncaught error prints a few lines", () => {
    const res = response(404, { code: "not_found", message: "gone", status: 404 });
    const e = new ApiError(res, { code: "not_found", message: "gone", status: 404 });
    expect(Object.keys(e).sort()).toEqual(["code", "requestId", "retryAfter", "status"]);
    expect(e.response).toBe(res); // still there for code that wants it
    expect(e.body).toEqual({ code: "not_found", message: "gone", status: 404 });
    expect(e.toString()).toBe("ApiError: 404 not_found: gone");
    expect(e.toString()).not.toContain("\n");
  });

  it("falls back to the status text when the body is not an API error (a proxy's page)", () => {
    const res = new Response("<html>bad gateway</html>", {
      status: 502,
      statusText: "Bad Gateway",
    });
    const e = new ApiError(res, "<html>bad gateway</html>");
    expect(e).toMatchObject({ status: 502, code: undefined, message: "Bad Gateway" });
    expect(e.toString()).toBe("ApiError: 502 error: Bad Gateway");
  });
});

describe("the client's README", () => {
  /** The number `pattern` finds in the README, which must state it. */
  const stated = (pattern: RegExp): number => {
    const found = clientReadme.match(pattern);
    expect(found, `${pattern} in packages/client/README.md`).not.toBeNull();
    return Number(found![1]);
  };

  it("states each retry default as RETRY_DEFAULTS has it", () => {
    expect(stated(/attempt may wait `timeoutMs` \((\d+) s\)/) * 1000).toBe(
      RETRY_DEFAULTS.timeoutMs,
    );
    expect(stated(/at most `maxRetries` \((\d+)\) times/)).toBe(RETRY_DEFAULTS.maxRetries);
    expect(stated(/`baseDelayMs` × 2\^retry \((\d+) ms,/)).toBe(RETRY_DEFAULTS.baseDelayMs);
    expect(stated(/at most `maxBackoffMs`, (\d+) s\)/) * 1000).toBe(RETRY_DEFAULTS.maxBackoffMs);
    expect(stated(/longer than `maxRetryAfterMs` \((\d+) s\)/) * 1000).toBe(
      RETRY_DEFAULTS.maxRetryAfterMs,
    );
  });
});
