import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { pageCacheUrl, pageSlot } from "../src/db/immutable-reads";
import { fromBase64Url } from "../src/lib/encoding";
import {
  auth,
  BASE,
  brokenDb,
  call,
  callWith,
  createPets,
  expect503,
  fixClock,
  issueKey,
  postJson,
} from "./helpers";

type Pet = { id: number; name: string; categoryId: number; status: string };

const bigKey = async () =>
  (await issueKey("enterprise", { perMinute: 10_000, perDay: 100_000 })).key;

/** The next-page URL of a response's Link header, if any. */
const nextUrl = (res: Response) => res.headers.get("Link")?.match(/^<([^>]+)>; rel="next"$/)?.[1];

/** What a cursor carries: "lastId:status:bookmark" (the payload before its 16-byte MAC). */
function cursorPayload(url: string): { lastId: number; bookmark: string } {
  const cursor = new URL(url, BASE).searchParams.get("cursor")!;
  const token = fromBase64Url(cursor);
  const [lastId, , bookmark] = new TextDecoder().decode(token.slice(0, -16)).split(":");
  return { lastId: Number(lastId), bookmark: bookmark! };
}

/** Server-Timing metric names of a response (`cache`, `db`, `quota`, …). */
const metrics = (res: Response) =>
  (res.headers.get("Server-Timing") ?? "").split(",").map((m) => m.trim().split(";")[0]);

/** A fresh cache generation, so each test starts with nothing cached (and leaves others alone). */
const freshEpoch = () => ({ PAGE_CACHE_EPOCH: crypto.randomUUID() });

/** Follows Link from `path` to the last page, through an app with `bindings`; every response. */
async function walk(key: string, path: string, bindings: object) {
  const pages: Response[] = [];
  let url: string | undefined = path;
  while (url) {
    const res = await callWith(bindings, url, { headers: auth(key) }, { wait: true });
    pages.push(res);
    if (res.status !== 200) break;
    url = nextUrl(res);
  }
  return pages;
}

describe("full pages and found pets are served without D1", () => {
  it("after one walk, every full page and each found pet answers with D1 down; the tail page and unknown pets need D1", async () => {
    const key = await bigKey();
    await createPets(
      key,
      [1, 2, 3, 4, 5].map((i) => ({ name: `walk-${i}`, categoryId: i })),
    );
    const epoch = freshEpoch();
    const warm = await walk(key, "/v1/pets?limit=2", epoch);
    expect(warm.length).toBeGreaterThanOrEqual(3);
    expect(warm.every((r) => r.status === 200)).toBe(true);
    const bodies = await Promise.all(warm.map((r) => r.clone().json()));

    const down = { ...epoch, DB: brokenDb() };
    const again = await walk(key, "/v1/pets?limit=2", down);
    // Every full page again, identical, from the cache; then the tail page fails (503) on D1.
    expect(again).toHaveLength(warm.length);
    for (let i = 0; i < warm.length - 1; i++) {
      expect(again[i]!.status).toBe(200);
      expect(await again[i]!.json()).toEqual(bodies[i]);
      expect(again[i]!.headers.get("ETag")).toBe(warm[i]!.headers.get("ETag"));
      expect(metrics(again[i]!)).toContain("cache");
      expect(metrics(again[i]!)).not.toContain("db");
    }
    await expect503(again.at(-1)!, "the tail page reads D1");

    const pet = (bodies[0] as Pet[])[0]!;
    expect(
      (await callWith(epoch, `/v1/pets/${pet.id}`, { headers: auth(key) }, { wait: true })).status,
    ).toBe(200);
    const found = await callWith(down, `/v1/pets/${pet.id}`, { headers: auth(key) });
    expect(found.status).toBe(200);
    expect(await found.json()).toEqual(pet);
    expect(metrics(found)).toContain("cache");
    await expect503(
      await callWith(down, `/v1/pets/${pet.id + 1_000_000}`, { headers: auth(key) }),
      "an unknown pet reads D1",
    );
  });

  it("a page with exactly `limit` pets and no next is a tail page: not cached, so its Link appears once a pet is added", async () => {
    const key = await bigKey();
    const epoch = freshEpoch();
    const sold = (name: string) =>
      postJson("/v1/pets", { name, categoryId: 1, status: "sold" }, auth(key));
    expect((await sold("tail-0")).status).toBe(201);
    const pages = await walk(key, "/v1/pets?limit=2&status=sold", epoch);
    const tailUrl = pages.length > 1 ? nextUrl(pages.at(-2)!)! : "/v1/pets?limit=2&status=sold";
    const onTail = ((await pages.at(-1)!.json()) as Pet[]).length;
    expect(onTail).toBeGreaterThanOrEqual(1);
    // Fill the tail page to exactly `limit` pets: full-looking, but nothing after it yet.
    for (let i = onTail; i < 2; i++) expect((await sold(`tail-${i}`)).status).toBe(201);
    const exactlyFull = await callWith(epoch, tailUrl, { headers: auth(key) }, { wait: true });
    expect(((await exactlyFull.json()) as Pet[]).length).toBe(2);
    expect(nextUrl(exactlyFull)).toBeUndefined();
    // Asked again, still no next: the page was not stored as if it were full.
    const again = await callWith(epoch, tailUrl, { headers: auth(key) });
    expect(metrics(again)).toContain("db");
    expect(nextUrl(again)).toBeUndefined();
    expect((await sold("late")).status).toBe(201);
    const later = await callWith(epoch, tailUrl, { headers: auth(key) }, { wait: true });
    expect(later.status).toBe(200);
    const next = nextUrl(later);
    expect(next).toBeDefined();
    const after = await callWith(epoch, next!, { headers: auth(key) });
    expect(((await after.json()) as Pet[]).map((p) => p.name)).toEqual(["late"]);
  });

  it("If-None-Match on a cached page → 304, still counted by the quota and carrying its headers", async () => {
    // A fixed instant in the middle of a minute: Remaining is compared across requests.
    fixClock(Date.UTC(2030, 2, 4, 9, 16, 30));
    const key = await bigKey();
    await createPets(
      key,
      [1, 2, 3].map((i) => ({ name: `etag-${i}`, categoryId: i })),
    );
    const epoch = freshEpoch();
    const first = await callWith(epoch, "/v1/pets?limit=2", { headers: auth(key) }, { wait: true });
    const etag = first.headers.get("ETag")!;
    const link = nextUrl(first);
    const down = { ...epoch, DB: brokenDb() };
    const res = await callWith(down, "/v1/pets?limit=2", {
      headers: auth(key, { "If-None-Match": etag }),
    });
    expect(res.status).toBe(304);
    expect(res.headers.get("ETag")).toBe(etag);
    // The next page continues from the same pet (the cursor's bookmark may differ: see README).
    expect(cursorPayload(nextUrl(res)!).lastId).toBe(cursorPayload(link!).lastId);
    expect(Number(res.headers.get("X-RateLimit-Remaining"))).toBe(
      Number(first.headers.get("X-RateLimit-Remaining")) - 1,
    );
  });
});

describe("cursors and bookmarks", () => {
  it("a cursor made from a cached page carries the freshest bookmark the request knew (the client's)", async () => {
    const key = await bigKey();
    await createPets(
      key,
      [1, 2, 3, 4, 5].map((i) => ({ name: `bm-${i}`, categoryId: i })),
    );
    const epoch = freshEpoch();
    // The first two pages (full: at least five pets) go into the cache.
    const warm = await callWith(epoch, "/v1/pets?limit=2", { headers: auth(key) }, { wait: true });
    expect(warm.status).toBe(200);
    const warmSecond = await callWith(
      epoch,
      nextUrl(warm)!,
      { headers: auth(key) },
      { wait: true },
    );
    expect(warmSecond.status).toBe(200);
    expect(nextUrl(warmSecond)).toBeDefined();
    // A write's bookmark, newer than the page was read at.
    const write = await postJson("/v1/pets", { name: "bm-write", categoryId: 1 }, auth(key));
    // The header is D1's bookmark, "." and its signature; cursors carry the bookmark itself.
    const written = write.headers.get("x-d1-bookmark")!;
    const writtenBookmark = written.split(".")[0];
    expect(writtenBookmark).toMatch(/^[0-9a-f-]+$/);

    const down = { ...epoch, DB: brokenDb() }; // proves the page is a cache hit
    const res = await callWith(down, "/v1/pets?limit=2", {
      headers: auth(key, { "x-d1-bookmark": written }),
    });
    expect(res.status).toBe(200);
    expect(cursorPayload(nextUrl(res)!).bookmark).toBe(writtenBookmark);

    // And from a cached page reached by a cursor: the cursor's own bookmark is carried on.
    const second = await callWith(down, nextUrl(res)!, { headers: auth(key) });
    expect(second.status).toBe(200);
    expect(metrics(second)).toContain("cache");
    expect(cursorPayload(nextUrl(second)!).bookmark).toBe(writtenBookmark);
  });
});

describe("PAGE_CACHE_EPOCH", () => {
  it("an operator's hand edit stays hidden behind the cache until the epoch is bumped", async () => {
    const key = await bigKey();
    const [a] = await createPets(
      key,
      [1, 2, 3].map((i) => ({ name: `epoch-${i}`, categoryId: i })),
    );
    const epoch = freshEpoch();
    const get = (bindings: object) =>
      callWith(bindings, `/v1/pets/${a!.id}`, { headers: auth(key) }, { wait: true });
    const firstPage = (bindings: object) =>
      callWith(bindings, "/v1/pets?limit=1", { headers: auth(key) }, { wait: true });
    expect(((await (await get(epoch)).json()) as Pet).name).toBe("epoch-1");
    const cachedFirst = (await (await firstPage(epoch)).json()) as Pet[];

    // The operator renames pets by hand (the API never does).
    await env.DB.prepare("UPDATE pets SET name = 'renamed' || id WHERE id IN (?1, ?2)")
      .bind(a!.id, cachedFirst[0]!.id)
      .run();
    expect(((await (await get(epoch)).json()) as Pet).name).toBe("epoch-1");
    expect(await (await firstPage(epoch)).json()).toEqual(cachedFirst);

    const bumped = freshEpoch();
    expect(((await (await get(bumped)).json()) as Pet).name).toBe(`renamed${a!.id}`);
    expect(((await (await firstPage(bumped)).json()) as Pet[])[0]!.name).toBe(
      `renamed${cachedFirst[0]!.id}`,
    );
  });

  it("is validated: an empty epoch is a configuration error (500), not an unkeyed cache", async () => {
    const key = await bigKey();
    const res = await callWith({ PAGE_CACHE_EPOCH: " " }, "/v1/pets?limit=1", {
      headers: auth(key),
    });
    expect(res.status).toBe(500);
  });
});

describe("the location's cache (Cache API)", () => {
  it("keys a page as it always has: the query URLSearchParams writes, for every status filter", () => {
    // Entries stored by an earlier release are found under the same key after a deploy.
    const scope = { environment: "production", epoch: "e 1/2" };
    for (const status of [undefined, "available", "pending", "sold"] as const) {
      const query = new URLSearchParams({ status: status ?? "", after: "40", limit: "20" });
      expect(pageCacheUrl(scope, { status, afterId: 40, limit: 20 })).toBe(
        `https://immutable-reads.invalid/v1/production/e%201%2F2/page?${query}`,
      );
    }
  });

  it("a tail page read from D1 skips the location's cache for a minute (it is not there), then looks again", async () => {
    const key = await bigKey();
    const epoch = freshEpoch();
    const path = "/v1/pets?limit=100&status=sold";
    const first = await callWith(epoch, path, { headers: auth(key) }, { wait: true });
    expect(first.status).toBe(200);
    expect(nextUrl(first), "fewer than 100 sold pets: a tail page").toBeUndefined();
    // As if another isolate had since read this page full and stored it.
    const planted = [{ id: 1, name: "planted", categoryId: 1, status: "sold" }];
    const url = pageCacheUrl(
      { environment: "local", epoch: epoch.PAGE_CACHE_EPOCH },
      { status: "sold", afterId: 0, limit: 100 },
    );
    await (await caches.open("immutable-reads")).put(
      url,
      Response.json(planted, { headers: { "Cache-Control": "public, max-age=600" } }),
    );
    // Within the minute the page goes straight to D1: a fresh answer, never a wrong one.
    const again = await callWith(epoch, path, { headers: auth(key) });
    expect(metrics(again)).toContain("db");
    expect(await again.json()).toEqual(await first.json());
    // Once the mark has expired, the location's cache is asked again (and here answers).
    fixClock(Date.now() + 61_000);
    const later = await callWith(epoch, path, { headers: auth(key) });
    expect(metrics(later)).toContain("cache");
    expect(await later.json()).toEqual(planted);
  });

  it("a full page is stored in the Cache API too, where another isolate finds it without D1", async () => {
    const key = await bigKey();
    await createPets(
      key,
      [1, 2, 3].map((i) => ({ name: `colo-${i}`, categoryId: i })),
    );
    const epoch = freshEpoch();
    const res = await callWith(epoch, "/v1/pets?limit=2", { headers: auth(key) }, { wait: true });
    const body = await res.json();
    const stored = await (await caches.open("immutable-reads")).match(
      pageCacheUrl(
        { environment: "local", epoch: epoch.PAGE_CACHE_EPOCH },
        { status: undefined, afterId: 0, limit: 2 },
      ),
    );
    expect(stored).toBeDefined();
    expect(await stored!.json()).toEqual(body);
  });

  it("the Worker's own isolate (a separate module instance from the test's app) answers from it", async () => {
    const key = await bigKey();
    await createPets(
      key,
      [1, 2, 3, 4].map((i) => ({ name: `iso-${i}`, categoryId: i })),
    );
    // The default epoch, as the Worker under test has it: warm through the test's app…
    const warm = await callWith(
      {},
      "/v1/pets?limit=3&status=available",
      { headers: auth(key) },
      {
        wait: true,
      },
    );
    const body = (await warm.json()) as Pet[];
    expect(nextUrl(warm), "a full page (four available pets exist)").toBeDefined();
    // …then hide the change from D1 readers and ask the Worker itself.
    await env.DB.prepare("UPDATE pets SET name = 'hidden' WHERE id = ?1").bind(body[0]!.id).run();
    const res = await call("/v1/pets?limit=3&status=available", { headers: auth(key) });
    expect(await res.json()).toEqual(body);
    // Put the name back for later tests of this file.
    await env.DB.prepare("UPDATE pets SET name = ?2 WHERE id = ?1")
      .bind(body[0]!.id, body[0]!.name)
      .run();
  });
});

describe("the two tiers, on the module itself", () => {
  type Module = typeof import("../src/db/immutable-reads");
  /** A new instance of the module: what another isolate of the same location starts with. */
  async function anotherIsolate(): Promise<Module> {
    vi.resetModules();
    return import("../src/db/immutable-reads");
  }
  const scope = () => ({ environment: "local", epoch: crypto.randomUUID() });
  const pet = (id: number, status: "available" | "pending" = "available") => ({
    id,
    name: `tier-${id}`,
    categoryId: 1,
    status,
  });
  /** Collects what the module hands to waitUntil, to wait for the location's cache to take it. */
  function afterResponse() {
    const work: Promise<unknown>[] = [];
    return { waitUntil: (p: Promise<unknown>) => void work.push(p), done: () => Promise.all(work) };
  }

  afterEach(() => vi.restoreAllMocks());

  it("a found pet is kept in the isolate that stored it and in the location's cache, where another isolate finds it and keeps it", async () => {
    const here = await anotherIsolate();
    const s = scope();
    const later = afterResponse();
    here.storeFoundPet(s, pet(7), later.waitUntil);
    await later.done();
    expect(await here.storedPet(s, 7)).toEqual({ value: pet(7), tier: "isolate" });
    const there = await anotherIsolate();
    expect(await there.storedPet(s, 7)).toEqual({ value: pet(7), tier: "colo" });
    expect(await there.storedPet(s, 7)).toEqual({ value: pet(7), tier: "isolate" });
    expect(await there.storedPet(s, 8)).toBeUndefined();
  });

  it("opens the location's cache once, and tries again after an open that failed", async () => {
    const s = scope();
    const later = afterResponse();
    (await anotherIsolate()).storeFoundPet(s, pet(9), later.waitUntil);
    await later.done();
    const open = vi.spyOn(caches, "open");
    open.mockRejectedValueOnce(new Error("cache unavailable"));
    const m = await anotherIsolate();
    expect(await m.storedPet(s, 9), "the open failed: D1 answers").toBeUndefined();
    expect(await m.storedPet(s, 9)).toEqual({ value: pet(9), tier: "colo" });
    expect(await m.storedPet(s, 10)).toBeUndefined();
    expect(await m.storedPet(s, 11)).toBeUndefined();
    expect(open).toHaveBeenCalledTimes(2); // the failed open and one more
  });

  it("stores only a full page", () => {
    const slot = pageSlot(scope(), { status: undefined, afterId: 0, limit: 2 });
    const { waitUntil } = afterResponse();
    expect(() => slot.storeFull([pet(1)], waitUntil)).toThrow("only a full page can be stored");
    expect(() => slot.storeFull([pet(1), pet(2), pet(3)], waitUntil)).toThrow(
      "only a full page can be stored",
    );
  });

  it("a page stored full after it was a tail is looked up in the location's cache again once the isolate's memory let it go", async () => {
    const m = await anotherIsolate();
    const s = scope();
    const slot = m.pageSlot(s, { status: "pending", afterId: 0, limit: 1 });
    slot.noteTail(); // D1 answered a tail…
    const later = afterResponse();
    slot.storeFull([pet(3, "pending")], later.waitUntil); // …then the page full
    // 256 pages stored since push it out of this isolate's memory (oldest out first).
    for (let afterId = 1; afterId <= 256; afterId++)
      m.pageSlot(s, { status: "pending", afterId, limit: 1 }).storeFull(
        [pet(afterId + 3, "pending")],
        later.waitUntil,
      );
    await later.done();
    expect(await slot.stored()).toEqual({ value: [pet(3, "pending")], tier: "colo" });
  });
});
