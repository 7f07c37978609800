import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { allPets, createAnimalStoreClient, nextCursor, retryingFetch } from "../src/client";
import { BASE, createPets, fixClock, issueKey } from "./helpers";

const viaWorker: typeof fetch = (input, init) => exports.default.fetch(new Request(input, init));

describe("typed client", () => {
  it("creates, lists and pages through pets against the app", async () => {
    const k = await issueKey("pro");
    const client = createAnimalStoreClient({ baseUrl: BASE, apiKey: k.key, fetch: viaWorker });
    const created = await client.pets.$post({
      json: { name: "Client Rex", categoryId: 7, status: "pending" },
      header: { "idempotency-key": crypto.randomUUID() },
    });
    expect(created.status).toBe(201);
    const pet = await created.json();
    expect(pet).toMatchObject({ name: "Client Rex", categoryId: 7, status: "pending" });

    await createPets(
      k.key,
      Array.from({ length: 4 }, (_, i) => ({ name: `p${i}`, categoryId: 1, status: "pending" })),
    );
    const first = await client.pets.$get({ query: { status: "pending", limit: "2" } });
    expect(first.status).toBe(200);
    expect(nextCursor(first)).toEqual(expect.any(String));

    const names: string[] = [];
    for await (const p of allPets(client, { status: "pending", limit: "2" })) names.push(p.name);
    expect(names).toEqual(["Client Rex", "p0", "p1", "p2", "p3"]);
  });

  it("waits Retry-After on 429, with exponential backoff, then succeeds", async () => {
    const time = fixClock(Date.UTC(2027, 2, 1, 10, 0, 0));
    const k = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
      time.now += ms; // time passes only when the client waits
    };
    const client = createAnimalStoreClient({
      baseUrl: BASE,
      apiKey: k.key,
      fetch: viaWorker,
      sleep,
      baseDelayMs: 100,
    });
    expect((await client.pets.$get({ query: {} })).status).toBe(200);
    time.now += 1_000; // 1 s into the minute: the next request is over the per-minute limit
    const res = await client.pets.$get({ query: {} });
    expect(res.status).toBe(200);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBe(59_000); // Retry-After (59 s) beats the 100 ms backoff step
  });

  it("gives up after maxRetries and returns the last 429", async () => {
    const always429: typeof fetch = async () =>
      new Response("{}", { status: 429, headers: { "Retry-After": "0" } });
    const waits: number[] = [];
    const f = retryingFetch({
      fetch: always429,
      maxRetries: 3,
      baseDelayMs: 100,
      sleep: async (ms) => void waits.push(ms),
    });
    expect((await f("https://x.example/v1/pets")).status).toBe(429);
    expect(waits).toHaveLength(3);
    // exponential: each step is within [0.5, 1] × 100 × 2^attempt
    waits.forEach((w, i) => {
      expect(w).toBeGreaterThanOrEqual(50 * 2 ** i);
      expect(w).toBeLessThanOrEqual(100 * 2 ** i);
    });
  });
});

describe("retry policy", () => {
  const answering =
    (status: number, retryAfter?: string): typeof fetch =>
    async () =>
      new Response("{}", {
        status,
        headers: retryAfter === undefined ? {} : { "Retry-After": retryAfter },
      });
  const counted = (inner: typeof fetch) => {
    const calls: string[] = [];
    const f: typeof fetch = (input, init) => (
      calls.push(init?.method ?? "GET"), inner(input, init)
    );
    return { calls, f };
  };
  const noSleep = async () => undefined;

  it("retries a 503 for a read, but not for a create without Idempotency-Key", async () => {
    const get = counted(answering(503, "1"));
    await retryingFetch({ fetch: get.f, maxRetries: 2, sleep: noSleep })(
      "https://x.example/v1/pets",
    );
    expect(get.calls).toHaveLength(3);
    const post = counted(answering(503, "1"));
    await retryingFetch({ fetch: post.f, maxRetries: 2, sleep: noSleep })(
      "https://x.example/v1/pets",
      { method: "POST", body: "{}" },
    );
    expect(post.calls).toHaveLength(1);
    const idempotent = counted(answering(503, "1"));
    await retryingFetch({ fetch: idempotent.f, maxRetries: 2, sleep: noSleep })(
      "https://x.example/v1/pets",
      { method: "POST", body: "{}", headers: { "Idempotency-Key": "k1" } },
    );
    expect(idempotent.calls).toHaveLength(3);
  });

  it("returns a 429 whose Retry-After is longer than maxDelayMs (a ban) instead of blocking", async () => {
    const banned = counted(answering(429, "900"));
    const res = await retryingFetch({ fetch: banned.f, maxDelayMs: 60_000, sleep: noSleep })(
      "https://x.example/v1/pets",
    );
    expect(res.status).toBe(429);
    expect(banned.calls).toHaveLength(1);
  });

  it("treats a non-numeric Retry-After as absent and backs off", async () => {
    const waits: number[] = [];
    await retryingFetch({
      fetch: answering(429, "soon"),
      maxRetries: 1,
      baseDelayMs: 100,
      sleep: async (ms) => void waits.push(ms),
    })("https://x.example/v1/pets");
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(50);
    expect(waits[0]).toBeLessThanOrEqual(100);
  });
});

describe("retry policy for Request objects", () => {
  it("does not retry a 503 answer to a POST Request without Idempotency-Key", async () => {
    let calls = 0;
    const f = retryingFetch({
      sleep: async () => undefined,
      fetch: async () => (
        calls++, new Response(null, { status: 503, headers: { "Retry-After": "1" } })
      ),
    });
    expect(
      (await f(new Request("https://x.example/v1/pets", { method: "POST", body: "{}" }))).status,
    ).toBe(503);
    expect(calls).toBe(1);
  });

  it("retries a 503 answer to a GET Request", async () => {
    let calls = 0;
    const f = retryingFetch({
      maxRetries: 2,
      sleep: async () => undefined,
      fetch: async () => (calls++, new Response(null, { status: 503 })),
    });
    await f(new Request("https://x.example/v1/pets"));
    expect(calls).toBe(3);
  });
});
