import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { toBase64Url } from "../src/lib/encoding";
import { auth, BASE, call, callWith, expectError, issueKey, recordingDb } from "./helpers";

type Status = "available" | "pending" | "sold";
const STATUSES: Status[] = ["available", "pending", "sold"];
type Pet = { id: number; name: string; categoryId: number; status: Status };

/** Inserts pets straight into D1 (fast, and not counted against any key). */
async function insertPets(statuses: Status[], tag: string): Promise<void> {
  const stmt = env.DB.prepare("INSERT INTO pets (name, category_id, status) VALUES (?1, ?2, ?3)");
  await env.DB.batch(statuses.map((s, i) => stmt.bind(`${tag}-${i}`, 1 + (i % 4), s)));
}

async function idsInDb(status?: Status): Promise<number[]> {
  const stmt = status
    ? env.DB.prepare("SELECT id FROM pets WHERE status = ?1 ORDER BY id").bind(status)
    : env.DB.prepare("SELECT id FROM pets ORDER BY id");
  return (await stmt.all<{ id: number }>()).results.map((r) => r.id);
}

function nextUrl(res: Response): string | null {
  const link = res.headers.get("Link");
  if (link === null) return null;
  const match = link.match(/^<([^>]+)>; rel="next"$/);
  expect(match, `Link: ${link}`).not.toBeNull();
  return match![1]!;
}

function listUrl(limit?: number, status?: Status, cursor?: string): string {
  const q = new URLSearchParams();
  if (limit !== undefined) q.set("limit", String(limit));
  if (status) q.set("status", status);
  if (cursor !== undefined) q.set("cursor", cursor);
  return `/v1/pets?${q}`;
}

/** Follows rel="next" to the end, checking every page and Link on the way. */
async function walk(
  key: string,
  limit: number,
  status?: Status,
  between?: (page: number) => Promise<void>,
) {
  let url: string | null = `${BASE}${listUrl(limit, status)}`;
  const ids: number[] = [];
  const cursors: string[] = [];
  let pages = 0;
  while (url !== null) {
    if (++pages > 500) throw new Error("walk does not end");
    const res = await exports.default.fetch(url, { headers: auth(key) });
    expect(res.status).toBe(200);
    const page = (await res.json()) as Pet[];
    expect(page.length).toBeLessThanOrEqual(limit);
    if (status) for (const pet of page) expect(pet.status).toBe(status);
    ids.push(...page.map((p) => p.id));
    url = nextUrl(res);
    if (url !== null) {
      expect(page).toHaveLength(limit); // only a full page can have a successor
      const next = new URL(url); // absolute: new URL() without a base would throw otherwise
      expect(`${next.origin}${next.pathname}`).toBe(`${BASE}/v1/pets`);
      expect(next.searchParams.get("limit")).toBe(String(limit));
      expect(next.searchParams.get("status")).toBe(status ?? null);
      expect(next.searchParams.get("cursor")).toMatch(/^[A-Za-z0-9_-]+$/);
      cursors.push(next.searchParams.get("cursor")!);
    }
    await between?.(pages);
  }
  return { ids, pages, cursors };
}

const bigKey = () =>
  issueKey("enterprise", { perMinute: 100_000, perDay: 1_000_000 }).then((k) => k.key);

// 40 pets: 16 available, 16 pending, 8 sold (each more than the largest multi-page limit, 7).
beforeAll(() =>
  insertPets(
    Array.from({ length: 40 }, (_, i) =>
      i % 5 < 2 ? "available" : i % 5 < 4 ? "pending" : "sold",
    ),
    "seed",
  ),
);

describe("walking all pages", () => {
  for (const status of [undefined, ...STATUSES]) {
    for (const limit of [1, 2, 7, 100]) {
      it(`status=${status ?? "(none)"} limit=${limit}: every pet exactly once, ascending, no Link on the last page`, async () => {
        const key = await bigKey();
        const expected = await idsInDb(status);
        expect(expected.length).toBeGreaterThan(limit === 100 ? 0 : limit); // the walk really spans pages
        const { ids, pages } = await walk(key, limit, status);
        expect(ids).toEqual(expected);
        expect(pages).toBe(Math.max(1, Math.ceil(expected.length / limit)));
      });
    }
  }

  it("no Link when the results fill exactly one page (or none)", async () => {
    const key = await bigKey();
    for (const status of [undefined, ...STATUSES]) {
      const n = (await idsInDb(status)).length;
      const res = await call(listUrl(n, status), { headers: auth(key) });
      expect(res.status).toBe(200);
      expect(await res.json()).toHaveLength(n);
      expect(res.headers.get("Link")).toBeNull();
    }
    // One fewer than all: there is a next page, and it holds exactly the last pet, with no Link.
    const all = await idsInDb();
    const first = await call(listUrl(all.length - 1), { headers: auth(key) });
    const next = nextUrl(first);
    expect(next).not.toBeNull();
    const last = await exports.default.fetch(next!, { headers: auth(key) });
    expect(((await last.json()) as Pet[]).map((p) => p.id)).toEqual([all[all.length - 1]]);
    expect(last.headers.get("Link")).toBeNull();
  });

  it("keeps the default limit in Link when the client gave none", async () => {
    const key = await bigKey();
    const pending = (await idsInDb("pending")).length;
    // More than one default page (20) of pending pets, so there is a next page.
    if (pending <= 20) await insertPets(Array(21 - pending).fill("pending"), "default-limit");
    expect((await idsInDb("pending")).length).toBeGreaterThan(20);
    const res = await call("/v1/pets?status=pending", { headers: auth(key) });
    expect(await res.json()).toHaveLength(20);
    const next = nextUrl(res);
    expect(next).not.toBeNull();
    expect(new URL(next!).searchParams.get("limit")).toBe("20");
    expect(new URL(next!).searchParams.get("status")).toBe("pending");
  });
});

describe("pets created during a walk", () => {
  for (const status of [undefined, "pending"] as const) {
    it(`are picked up, none repeated or skipped (status=${status ?? "(none)"})`, async () => {
      const key = await bigKey();
      const before = await idsInDb(status);
      const { ids } = await walk(key, 3, status, async (page) => {
        if (page <= 3)
          await insertPets(["pending", "sold", "available", "pending"], `during-${status}-${page}`);
      });
      const after = await idsInDb(status);
      expect(after.length).toBeGreaterThan(before.length);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toEqual(after);
    });
  }
});

describe("invalid cursors → 400 invalid_request", () => {
  // Genuine cursors, each with the status filter it was made for.
  let real: Array<{ cursor: string; status?: Status }> = [];
  beforeAll(async () => {
    const key = await bigKey();
    real = [];
    for (const status of [undefined, ...STATUSES])
      real.push(
        ...(await walk(key, 2, status)).cursors.slice(0, 3).map((cursor) => ({ cursor, status })),
      );
  });

  async function expectCursorRefused(key: string, cursor: string, status?: Status, limit = 2) {
    const res = await call(listUrl(limit, status, cursor), { headers: auth(key) });
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toMatch(/cursor/i);
  }

  it("malformed: random strings, truncated, base64 of other data, empty", async () => {
    const key = await bigKey();
    const text = (s: string) => toBase64Url(new TextEncoder().encode(s));
    const cursor = real[0]!.cursor;
    const malformed = [
      "",
      "abc",
      "not-a-cursor",
      "x".repeat(30),
      "A".repeat(40),
      "%%%%%%%%%%%%%%%%%%%%%%",
      "a".repeat(500),
      toBase64Url(crypto.getRandomValues(new Uint8Array(32))),
      cursor.slice(0, -1),
      cursor.slice(0, -2),
      cursor.slice(0, -4),
      cursor.slice(0, 12),
      cursor.slice(3),
      `${cursor}=`,
      `${cursor}==`,
      cursor + cursor,
      cursor.replace(/-/g, "+").replace(/_/g, "/"),
      text('{"lastId":5,"status":"pending"}'),
      text("5:pending"),
      text("12345678901234567890:"),
      toBase64Url(new Uint8Array([...new TextEncoder().encode("5:"), ...new Uint8Array(16)])), // right shape, no MAC
      toBase64Url(new Uint8Array([...new TextEncoder().encode("0:"), ...new Uint8Array(16)])),
    ];
    // (the standard-base64 spelling only differs if the cursor has a '-' or '_')
    for (const bad of malformed.filter((m) => m !== cursor)) await expectCursorRefused(key, bad);
  });

  // About 250 requests in a row: 10–20 s on a shared, loaded 2-core machine, past the 5 s default.
  it("tampered: any character of a real cursor changed (slow: one real request per character)", {
    timeout: 60_000,
  }, async () => {
    const key = await bigKey();
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    expect(new Set(real.map((r) => r.status ?? "-")).size).toBe(4);
    for (const { cursor, status } of real) {
      expect((await call(listUrl(2, status, cursor), { headers: auth(key) })).status).toBe(200);
      for (let i = 0; i < cursor.length; i++) {
        // Flip the highest of the character's six bits: always a change in the decoded bytes.
        const flipped = alphabet[alphabet.indexOf(cursor[i]!) ^ 32]!;
        const tampered = cursor.slice(0, i) + flipped + cursor.slice(i + 1);
        const res = await call(listUrl(2, status, tampered), { headers: auth(key) });
        expect(res.status, `position ${i} of ${cursor} (status ${status})`).toBe(400);
        expect(((await res.json()) as { message: string }).message).toMatch(/cursor/i);
      }
    }
  });

  it("tampered: a non-canonical spelling of a real cursor (unused low bits of the last character) is refused too", async () => {
    const key = await bigKey();
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const found = real.find((r) => r.cursor.length % 4 !== 0);
    expect(found, "a cursor whose last character has unused bits").toBeDefined();
    const { cursor, status } = found!;
    const variant = cursor.slice(0, -1) + alphabet[alphabet.indexOf(cursor.at(-1)!) ^ 1]!;
    expect(variant).not.toBe(cursor);
    expect((await call(listUrl(2, status, cursor), { headers: auth(key) })).status).toBe(200);
    await expectCursorRefused(key, variant, status);
  });

  it("a cursor used with another status filter", async () => {
    const key = await bigKey();
    const { cursors: pending } = await walk(key, 2, "pending");
    const { cursors: unfiltered } = await walk(key, 2);
    expect((await call(listUrl(2, "pending", pending[0]), { headers: auth(key) })).status).toBe(
      200,
    );
    await expectCursorRefused(key, pending[0]!, "sold");
    await expectCursorRefused(key, pending[0]!, "available");
    await expectCursorRefused(key, pending[0]!, undefined);
    await expectCursorRefused(key, unfiltered[0]!, "pending");
  });

  it("a valid cursor with an invalid limit", async () => {
    const key = await bigKey();
    const { cursor } = real[0]!;
    expect((await call(listUrl(2, undefined, cursor), { headers: auth(key) })).status).toBe(200);
    for (const limit of ["0", "101", "-1", "abc", "1.5", "", "1e1"]) {
      const res = await call(`/v1/pets?limit=${encodeURIComponent(limit)}&cursor=${cursor}`, {
        headers: auth(key),
      });
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toMatch(/limit/);
    }
  });
});

describe("cursors and read replicas", () => {
  it("the next page's D1 session starts from the bookmark its cursor carries", async () => {
    const key = await bigKey();
    // A fresh PAGE_CACHE_EPOCH: neither page is served from the cache, so both read D1.
    const epoch = crypto.randomUUID();
    const first = await callWith({ PAGE_CACHE_EPOCH: epoch }, listUrl(1), { headers: auth(key) });
    // The header is the D1 bookmark and its tag: the session opens from the bookmark itself.
    const pageBookmark = first.headers.get("x-d1-bookmark")?.split(".")[0];
    expect(pageBookmark).toMatch(/^[0-9a-f-]+$/);
    const { db, opened } = recordingDb();
    const fresh = { DB: db, PAGE_CACHE_EPOCH: epoch };
    const res = await callWith(fresh, nextUrl(first)!, { headers: auth(key) });
    expect(res.status).toBe(200);
    expect(opened).toEqual([pageBookmark]);
  });
});

describe("without CURSOR_SECRET", () => {
  it("a single page still works, but paging answers 500 (and logs why) rather than sign with a guessable key", async () => {
    const key = await bigKey();
    const send = (path: string) => callWith({ CURSOR_SECRET: "" }, path, { headers: auth(key) });
    expect((await send("/v1/pets?limit=100&status=sold")).status).toBe(200);
    await expectError(await send("/v1/pets?limit=1"), 500, "internal_error");
  });
});
