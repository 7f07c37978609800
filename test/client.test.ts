// The @animal-store/client package (packages/client/src) against the app in workerd, and its
// retry policy against stub servers. e2e/client-package.test.mjs checks the packed package itself.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  AnimalStoreError,
  createAnimalStoreClient,
  retryAfterMs,
  retryingFetch,
} from "../packages/client/src/index";
import { BASE, createPets, fixClock, issueKey } from "./helpers";

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
    for await (const p of store.pets({ status: "pending", limit: 2 })) names.push(p.name);
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

  it("replays a create with the same Idempotency-Key instead of creating a second pet", async () => {
    const k = await issueKey("pro");
    const store = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    const idempotencyKey = crypto.randomUUID();
    const a = await store.createPet({ name: "Once", categoryId: 3 }, { idempotencyKey });
    const b = await store.createPet({ name: "Once", categoryId: 3 }, { idempotencyKey });
    expect(b).toEqual(a);
    expect(a.status).toBe("available");
  });

  it("throws AnimalStoreError with the error body", async () => {
    const k = await issueKey("pro");
    const store = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    const missing = await store.getPet(987654321).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(AnimalStoreError);
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    const bad = await store.createPet({ name: "", categoryId: 1 }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, code: "invalid_request" });
    const wrongKey = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: "pet_test_nope",
      fetch: viaWorker,
    });
    await expect(wrongKey.listPets()).rejects.toMatchObject({ status: 401, code: "unauthorized" });
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

  it("returns a 429 whose Retry-After is longer than maxDelayMs as an error, without waiting", async () => {
    fixClock(Date.UTC(2027, 2, 1, 10, 0, 0));
    const k = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    const waits: number[] = [];
    const store = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      sleep: async (ms) => void waits.push(ms),
      maxDelayMs: 10_000,
    });
    await store.listPets();
    const err = await store.listPets().catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 429, code: "rate_limited", retryAfter: 60 });
    expect(waits).toEqual([]);
    expect(store.rateLimit).toMatchObject({ limit: 1, remaining: 0 });
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
  const noSleep = async () => undefined;
  const url = "https://x.example/v1/pets";

  it("retries 429 and 503 for a read, up to maxRetries, with exponential backoff and jitter", async () => {
    for (const status of [429, 503]) {
      const get = counted(answering(status));
      const waits: number[] = [];
      const res = await retryingFetch({
        fetch: get.f,
        maxRetries: 3,
        baseDelayMs: 100,
        sleep: async (ms) => void waits.push(ms),
      })(url);
      expect(res.status).toBe(status);
      expect(get.calls).toHaveLength(4);
      waits.forEach((w, i) => {
        expect(w).toBeGreaterThanOrEqual(50 * 2 ** i);
        expect(w).toBeLessThanOrEqual(100 * 2 ** i);
      });
      expect(waits).toHaveLength(3);
    }
  });

  it("uses the random source for jitter", async () => {
    const waits: number[] = [];
    await retryingFetch({
      fetch: answering(503),
      maxRetries: 2,
      baseDelayMs: 100,
      random: () => 0,
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(waits).toEqual([50, 100]);
    waits.length = 0;
    await retryingFetch({
      fetch: answering(503),
      maxRetries: 2,
      baseDelayMs: 100,
      random: () => 0.999999,
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(waits.map(Math.round)).toEqual([100, 200]);
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
      const post = counted(answering(status));
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

  it("returns a Retry-After longer than maxDelayMs (a ban) instead of blocking", async () => {
    const banned = counted(answering(429, { "Retry-After": "900" }));
    const res = await retryingFetch({ fetch: banned.f, maxDelayMs: 60_000, sleep: noSleep })(url);
    expect(res.status).toBe(429);
    expect(banned.calls).toHaveLength(1);
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
      sleep: async (ms) => void waits.push(ms),
    })(url);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(50);
    expect(waits[0]).toBeLessThanOrEqual(100);
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

  it("types limit as a number and Idempotency-Key as optional, and sends them as given", async () => {
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
    expect(sent[1]!.headers.has("Idempotency-Key")).toBe(false);
    expect(sent[2]!.headers.get("Idempotency-Key")).toBe("retry-1");
  });
});
