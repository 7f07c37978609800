// The page cursor's wire format: cursors handed out before a change must still decode after it.
// The fixed strings below were made by the cursor code as it stood before lib/crypto's
// signedTag/verifyTag (and agree with node:crypto's HMAC-SHA-256, truncated to 16 bytes).
import { describe, expect, it } from "vitest";
import {
  decodeCursorOrThrow,
  encodeCursor,
  nextLink,
  nextPageLink,
} from "../src/routes/pets/cursor";

const SECRET = "wire-format-test-secret";
const BOOKMARK = "0000000a-00000001-00004e2f-c1a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5";

/** base64url(`<lastId>:<status>:<bookmark>` ‖ first 16 bytes of HMAC-SHA-256 under SECRET). */
const ISSUED = [
  {
    lastId: 42,
    status: "available",
    bookmark: BOOKMARK,
    cursor:
      "NDI6YXZhaWxhYmxlOjAwMDAwMDBhLTAwMDAwMDAxLTAwMDA0ZTJmLWMxYTFiMmMzZDRlNWY2YTdiOGM5ZDBlMWYyYTNiNGM1W_UhTIhxW7GvNfh8dNh0_w",
  },
  { lastId: 7, status: undefined, bookmark: null, cursor: "Nzo6TYxGEysCdhOga2nosOahvQ" },
] as const;

describe("page cursors keep their wire format", () => {
  it.each(ISSUED)("encodes $lastId/$status to the same string as before", async (issued) => {
    expect(await encodeCursor(SECRET, issued.lastId, issued.status, issued.bookmark)).toBe(
      issued.cursor,
    );
  });

  it.each(ISSUED)("decodes a cursor issued before ($lastId/$status)", async (issued) => {
    expect(await decodeCursorOrThrow([SECRET], issued.cursor, issued.status)).toEqual({
      afterId: issued.lastId,
      bookmark: issued.bookmark,
    });
  });

  it("refuses an issued cursor under another secret, or with its tag's last byte changed", async () => {
    const [issued] = ISSUED;
    await expect(
      decodeCursorOrThrow(["another-secret"], issued.cursor, issued.status),
    ).rejects.toThrow(/cursor: is not a cursor returned by this API/);
    const altered = `${issued.cursor.slice(0, -1)}${issued.cursor.endsWith("w") ? "A" : "w"}`;
    await expect(decodeCursorOrThrow([SECRET], altered, issued.status)).rejects.toThrow(
      /cursor: is not a cursor returned by this API/,
    );
  });
});

describe("the next page's Link, made once per page in an isolate", () => {
  it("is the Link of the signed cursor, the same at every request, and another for another secret or bookmark", async () => {
    const [issued] = ISSUED;
    const link = (secret: string, bookmark: string | null) =>
      nextPageLink(secret, "https://api.example.com", "/v1/pets", 20, "available", 42, bookmark);
    const expected = nextLink(
      "https://api.example.com",
      "/v1/pets",
      20,
      "available",
      issued.cursor,
    );
    expect(await link(SECRET, BOOKMARK)).toBe(expected);
    expect(await link(SECRET, BOOKMARK)).toBe(expected);
    const otherSecret = await link("another-secret-of-the-same-kind", BOOKMARK);
    expect(otherSecret).not.toBe(expected);
    const cursorOf = (l: string) =>
      new URL(l.slice(1, l.indexOf(">"))).searchParams.get("cursor") ?? "";
    expect(cursorOf(otherSecret)).toBe(
      await encodeCursor("another-secret-of-the-same-kind", 42, "available", BOOKMARK),
    );
    expect(cursorOf(await link(SECRET, null))).toBe(
      await encodeCursor(SECRET, 42, "available", null),
    );
  });
});
