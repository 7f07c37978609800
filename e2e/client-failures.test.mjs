// @ts-check
// The client package (packages/client/src, bundled with esbuild) against `wrangler dev` when
// things go wrong: the server killed in the middle of a create, whose answer is lost, and started
// again; a burst of requests past a key's per-minute limit; a create sent twice with one key.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { build } from "esbuild";
import { cleanupNow, issueKey, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";
import { listenOnFreePort, ROOT } from "./helpers.mjs";

/** The client as its ESM build has it, from the current source (no `npm run build` needed). */
async function importClient(dir) {
  const outfile = path.join(dir, "client.mjs");
  await build({
    entryPoints: [path.join(ROOT, "packages/client/src/index.ts")],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    outfile,
    logLevel: "warning",
  });
  return import(outfile);
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length"]);

/** @typedef {{ status: number, body: unknown }} LostAnswer What the API answered to a create whose answer was lost. */

/**
 * An HTTP proxy in front of the API. A request it cannot forward (the API is down) has its
 * connection cut, as a dead server's would be. `loseNextCreate(onLost)` makes the next
 * `POST /v1/pets` reach the API, hands its answer to `onLost` and, once that is done, cuts the
 * client's connection instead of answering.
 */
async function startProxy(api) {
  /** @type {((answer: LostAnswer) => Promise<void>) | undefined} */
  let lose;
  const stats = { cut: 0 };
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    /** @type {Record<string, string>} */
    const headers = {};
    for (const [name, value] of Object.entries(req.headers))
      if (name !== "host" && !HOP_BY_HOP.has(name) && value !== undefined)
        headers[name] = Array.isArray(value) ? value.join(", ") : value;
    let upstream;
    try {
      upstream = await fetch(`${api.url}${req.url}`, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
    } catch {
      stats.cut++;
      req.socket.destroy();
      return;
    }
    const body = Buffer.from(await upstream.arrayBuffer());
    if (lose && req.method === "POST" && req.url === "/v1/pets") {
      const onLost = lose;
      lose = undefined;
      await onLost({ status: upstream.status, body: JSON.parse(body.toString("utf8")) });
      req.socket.destroy();
      return;
    }
    /** @type {Record<string, string>} */
    const out = {};
    upstream.headers.forEach((value, key) => {
      if (!HOP_BY_HOP.has(key) && key !== "content-encoding") out[key] = value;
    });
    res.writeHead(upstream.status, out);
    res.end(body);
  });
  const port = await listenOnFreePort(server);
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    /** @param {(answer: LostAnswer) => Promise<void>} onLost */
    loseNextCreate(onLost) {
      lose = onLost;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

/** A port on 127.0.0.1 that was just free, and on which nothing listens. */
async function closedPort() {
  const server = createServer();
  const port = await listenOnFreePort(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Waits for the next UTC minute when fewer than `seconds` are left in this one. */
async function waitForRoomInMinute(seconds) {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

describe("the client when the server fails", () => {
  let dir;
  let api;
  let client;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "animal-store-client-failures-"));
    client = await importClient(dir);
    api = await startApiOnFreePorts({ localObservability: false });
  });

  after(async () => {
    await api?.stop();
    cleanupNow();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("survives the server being killed in the middle of a create: the retry returns the pet created", async () => {
    const { key } = await issueKey(api, { name: "killed", plan: "pro" });
    const proxy = await startProxy(api);
    const answers = [];
    try {
      /** @type {LostAnswer | undefined} */
      let lost;
      let restarted;
      proxy.loseNextCreate(async (answer) => {
        lost = answer;
        // The create is stored; the server dies before its answer reaches the client, and
        // comes back (same port, same state) while the client retries.
        await api.stop();
        restarted = api.restart();
      });
      const store = client.createAnimalStoreClient({
        baseUrl: proxy.url,
        apiKey: key,
        maxRetries: 60,
        baseDelayMs: 200,
        maxBackoffMs: 2_000,
        onResponse: (res) =>
          answers.push({ status: res.status, replayed: res.headers.get("Idempotent-Replayed") }),
      });
      const name = `Survivor ${Date.now()}`;
      const pet = await store.createPet({ name, categoryId: 9 });
      await restarted;

      assert.ok(lost, "the proxy lost a create's answer");
      assert.equal(lost.status, 201, "the first attempt created the pet");
      assert.deepEqual(pet, lost.body, "the retry returned the pet the lost answer held");
      assert.ok(proxy.stats.cut >= 1, "some retries found the server down");
      assert.deepEqual(answers, [{ status: 201, replayed: "true" }]);

      const direct = client.createAnimalStoreClient({ baseUrl: api.url, apiKey: key });
      const same = [];
      for await (const p of direct.listAllPets({ limit: 100 })) if (p.name === name) same.push(p);
      assert.deepEqual(same, [pet], "one pet, not two");
    } finally {
      await proxy.close();
    }
  });

  it("throws a typed NetworkError, with the cause, when the server stays down", async () => {
    const port = await closedPort();
    const store = client.createAnimalStoreClient({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: "pet_test_x",
      maxRetries: 2,
      baseDelayMs: 10,
    });
    const err = await store.listPets().catch((e) => e);
    assert.ok(err instanceof client.NetworkError, String(err));
    assert.equal(err.attempts, 3);
    assert.equal(
      String(err),
      `NetworkError: GET http://127.0.0.1:${port}/v1/pets failed after 3 attempts: fetch failed (ECONNREFUSED)`,
    );
    assert.ok(err.cause instanceof TypeError);
  });

  it("throws RateLimitErrors for a burst past the limit when told not to wait", async () => {
    const { key } = await issueKey(api, {
      name: "burst",
      plan: "enterprise",
      limits: { perMinute: 5, perDay: 1000 },
    });
    await waitForRoomInMinute(10); // the whole burst in one minute window
    let sent = 0;
    const store = client.createAnimalStoreClient({
      baseUrl: api.url,
      apiKey: key,
      maxRetryAfterMs: 0,
      onResponse: () => sent++,
    });
    const results = await Promise.allSettled(
      Array.from({ length: 9 }, () => store.listPets({ limit: 1 })),
    );
    const refused = results.filter((r) => r.status === "rejected").map((r) => r.reason);
    assert.equal(results.length - refused.length, 5, "the limit's five are served");
    assert.equal(refused.length, 4);
    assert.equal(sent, 9, "nothing was retried");
    for (const e of refused) {
      assert.ok(e instanceof client.RateLimitError && e instanceof client.ApiError, String(e));
      assert.equal(e.status, 429);
      assert.equal(e.code, "rate_limited");
      assert.ok(e.retryAfter >= 1 && e.retryAfter <= 60, `retryAfter ${e.retryAfter}`);
      assert.match(e.requestId, /^[\w-]{8,}$/);
      assert.match(
        String(e),
        new RegExp(
          `^RateLimitError: 429 rate_limited: .+ \\(request ${e.requestId}, retry after ${e.retryAfter} s\\)$`,
        ),
      );
    }
    // The burst's answers arrive in any order, so the last one may be an early admission: one more
    // request, answered after all of them, shows the window as the burst left it.
    await assert.rejects(store.listPets({ limit: 1 }), client.RateLimitError);
    assert.equal(store.rateLimit.windows.minute.remaining, 0);
  });

  it("waits out Retry-After for a burst past the limit, and serves every request", async () => {
    const { key } = await issueKey(api, {
      name: "patient burst",
      plan: "enterprise",
      limits: { perMinute: 5, perDay: 1000 },
    });
    await waitForRoomInMinute(10);
    const refusals = [];
    const store = client.createAnimalStoreClient({
      baseUrl: api.url,
      apiKey: key,
      onResponse: (res) => {
        if (res.status === 429)
          refusals.push({ at: Date.now(), retryAfter: Number(res.headers.get("Retry-After")) });
      },
    });
    const started = Date.now();
    const pages = await Promise.all(Array.from({ length: 9 }, () => store.listPets({ limit: 1 })));
    assert.equal(pages.length, 9);
    assert.equal(refusals.length, 4, "four over the limit, each refused once, then served");
    const nextMinute = Math.ceil(started / 60_000) * 60_000;
    assert.ok(Date.now() >= nextMinute, "the four were served in the next minute, not before");
    for (const r of refusals) assert.ok(r.retryAfter >= 1 && r.retryAfter <= 60);
  });

  it("returns the same pet for a create replayed with its Idempotency-Key, and refuses another body", async () => {
    const { key } = await issueKey(api, { name: "replay", plan: "pro" });
    const replayed = [];
    const store = client.createAnimalStoreClient({
      baseUrl: api.url,
      apiKey: key,
      onResponse: (res) => replayed.push(res.headers.get("Idempotent-Replayed")),
    });
    const idempotencyKey = crypto.randomUUID();
    const first = await store.createPet({ name: "Twice", categoryId: 3 }, { idempotencyKey });
    const second = await store.createPet({ name: "Twice", categoryId: 3 }, { idempotencyKey });
    assert.deepEqual(second, first);
    assert.deepEqual(replayed, [null, "true"]);
    const other = await store
      .createPet({ name: "Another", categoryId: 3 }, { idempotencyKey })
      .catch((e) => e);
    assert.ok(other instanceof client.ApiError, String(other));
    assert.equal(other.status, 422);
    assert.equal(other.code, "idempotency_key_reused");
  });
});
