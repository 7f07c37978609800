import { describe, expect, it } from "vitest";
import { signBookmark, verifiedBookmarkOrThrow } from "../src/middleware/d1-session";
import { auth, call, callWith, expectError, issueKey, postJson, recordingDb } from "./helpers";

const FUTURE = `ffffffff-ffffffff-ffffffff-${"f".repeat(32)}`;
const SIGNED = /^[0-9a-f]{8}(-[0-9a-f]{8,64}){1,8}\.[A-Za-z0-9_-]{22}$/i;

describe("x-d1-bookmark: only bookmarks this API returned are honoured", () => {
  it("a bookmark from the future (ffffffff-…) → 400 naming the header; no session opens from it", async () => {
    const { key } = await issueKey();
    const { db, opened } = recordingDb();
    for (const value of [FUTURE, `${FUTURE}.${"A".repeat(22)}`]) {
      const res = await callWith({ DB: db }, "/v1/pets", {
        headers: auth(key, { "x-d1-bookmark": value }),
      });
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toMatch(/^x-d1-bookmark: must be a bookmark returned by this API/);
      expect(res.headers.get("x-d1-bookmark")).toBeNull();
    }
    expect(opened).toEqual([]);
  });

  it("a real bookmark with its tag altered, or signed under another secret, → 400", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "B", categoryId: 1 }, auth(key));
    const issued = created.headers.get("x-d1-bookmark")!;
    expect(issued).toMatch(SIGNED);
    const [bookmark, tag] = issued.split(".") as [string, string];
    const flipped = `${bookmark}.${tag[0] === "A" ? "B" : "A"}${tag.slice(1)}`;
    const foreign = await signBookmark("another-environment's-secret", bookmark);
    const later = `${bookmark.slice(0, -1)}${bookmark.endsWith("f") ? "e" : "f"}.${tag}`;
    for (const value of [bookmark, flipped, foreign, later]) {
      const res = await call("/v1/pets", { headers: auth(key, { "x-d1-bookmark": value }) });
      await expectError(res, 400, "invalid_request");
    }
  });

  it("the bookmark a response returned, sent back unchanged, is honoured: the session starts from it", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "Mine", categoryId: 1 }, auth(key));
    const issued = created.headers.get("x-d1-bookmark")!;
    const { db, opened } = recordingDb();
    const res = await callWith({ DB: db }, "/v1/pets?limit=100", {
      headers: auth(key, { "x-d1-bookmark": issued }),
    });
    expect(res.status).toBe(200);
    expect(opened).toEqual([issued.split(".")[0]]);
    expect(res.headers.get("x-d1-bookmark")).toMatch(SIGNED);
  });

  it("without CURSOR_SECRET no bookmark is returned, and none is accepted", async () => {
    const { key } = await issueKey();
    const issued = (await call("/v1/pets", { headers: auth(key) })).headers.get("x-d1-bookmark")!;
    const res = await callWith({ CURSOR_SECRET: "" }, "/v1/pets", { headers: auth(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-d1-bookmark")).toBeNull();
    const sent = await callWith({ CURSOR_SECRET: "" }, "/v1/pets", {
      headers: auth(key, { "x-d1-bookmark": issued }),
    });
    await expectError(sent, 400, "invalid_request");
  });
});

// A D1 bookmark and the tag that shows this API issued it.
const BOOKMARK = SIGNED;

describe("D1 sessions: x-d1-bookmark", () => {
  it("is returned on /v1 responses (list, create, get)", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "Bookmarked", categoryId: 1 }, auth(key));
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: number };
    for (const res of [
      created,
      await call("/v1/pets", { headers: auth(key) }),
      await call(`/v1/pets/${id}`, { headers: auth(key) }),
    ]) {
      expect(res.headers.get("x-d1-bookmark")).toMatch(BOOKMARK);
    }
  });

  it("a bookmark sent back is accepted, and the write it followed is visible", async () => {
    const { key } = await issueKey();
    const created = await postJson("/v1/pets", { name: "ReadMyWrite", categoryId: 2 }, auth(key));
    const { id } = (await created.json()) as { id: number };
    const bookmark = created.headers.get("x-d1-bookmark")!;
    const list = await call("/v1/pets?limit=100", {
      headers: auth(key, { "x-d1-bookmark": bookmark }),
    });
    expect(list.status).toBe(200);
    expect(((await list.json()) as Array<{ id: number }>).map((p) => p.id)).toContain(id);
    expect(list.headers.get("x-d1-bookmark")).toMatch(BOOKMARK);
  });

  it("a malformed bookmark → 400 invalid_request naming the header", async () => {
    const { key } = await issueKey();
    for (const bad of [
      "not-a-bookmark",
      "00000000",
      "zzzzzzzz-00000000",
      "00000000-0000",
      "00000000-00000000; DROP TABLE pets",
      "x".repeat(600),
    ]) {
      const body = await expectError(
        await call("/v1/pets", { headers: auth(key, { "x-d1-bookmark": bad }) }),
        400,
        "invalid_request",
      );
      expect(body.message).toContain("x-d1-bookmark");
    }
  });
});

describe("x-d1-bookmark keeps its wire format", () => {
  // Made by the signing code as it stood before lib/crypto's signedTag/verifyTag (and agrees with
  // node:crypto): `<bookmark>.<base64url of the first 16 bytes of HMAC-SHA-256 of "bookmark:<bookmark>">`.
  const SECRET = "wire-format-test-secret";
  const BOOKMARK_D1 = "0000000a-00000001-00004e2f-c1a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5";
  const ISSUED = `${BOOKMARK_D1}.gZHtQNk8YqjbuM0HKPUKgw`;

  it("signs a bookmark to the same value as before", async () => {
    expect(await signBookmark(SECRET, BOOKMARK_D1)).toBe(ISSUED);
  });

  it("accepts a value issued before, and refuses its tag spelled another way", async () => {
    expect(await verifiedBookmarkOrThrow([SECRET], ISSUED)).toBe(BOOKMARK_D1);
    // The tag's last character carries 2 unused bits: "w" and "x" decode to the same 16 bytes.
    const respelled = `${ISSUED.slice(0, -1)}x`;
    await expect(verifiedBookmarkOrThrow([SECRET], respelled)).rejects.toThrow(/x-d1-bookmark/);
    await expect(verifiedBookmarkOrThrow(["another-secret"], ISSUED)).rejects.toThrow(
      /x-d1-bookmark/,
    );
  });
});
