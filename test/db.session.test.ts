import { describe, expect, it } from "vitest";
import { D1Session } from "../src/db/session";

/** A D1 binding that records which bookmark each session started from. */
function recordingDb() {
  const opened: string[] = [];
  const db = {
    withSession: (b: string) => (opened.push(b), { getBookmark: () => null }),
  } as unknown as D1Database;
  return { opened, db };
}

describe("D1Session", () => {
  it("starts first-unconstrained without a bookmark, and only when first used", () => {
    const { opened, db } = recordingDb();
    const s = new D1Session(db);
    expect(opened).toEqual([]);
    void s.session;
    void s.session;
    expect(opened).toEqual(["first-unconstrained"]);
    expect(s.bookmark()).toBeNull();
  });

  it("starts from the newest of the bookmarks it was given, whatever their hex case", () => {
    const { opened, db } = recordingDb();
    const s = new D1Session(db, "00000000-0000000B-00000000");
    s.atLeast("00000000-0000000a-00000000");
    void s.session;
    expect(opened[0]!.toLowerCase()).toBe("00000000-0000000b-00000000");

    const t = recordingDb();
    const u = new D1Session(t.db, "00000000-00000001-00000000");
    u.atLeast("00000000-00000002-00000000");
    void u.session;
    expect(t.opened).toEqual(["00000000-00000002-00000000"]);
  });
});
