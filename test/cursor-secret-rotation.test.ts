// Rotating CURSOR_SECRET without breaking clients: while CURSOR_SECRET_PREVIOUS holds the old
// secret, the page cursors and D1 bookmarks signed with it are still accepted, and everything
// new is signed with the new one. Without it, the old ones are refused (400).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { auth, call, callWith, createPets, expectError, issueKey, postJson } from "./helpers";

const OLD = env.CURSOR_SECRET;
const NEW = "rotation-new-cursor-secret";
const ROTATING = { CURSOR_SECRET: NEW, CURSOR_SECRET_PREVIOUS: OLD };
const ROTATED = { CURSOR_SECRET: NEW };

const cursorOf = (res: Response) => {
  const cursor = res.headers.get("Link")?.match(/[?&]cursor=([A-Za-z0-9_-]+)/)?.[1];
  if (!cursor) throw new Error(`no next-page cursor in Link: ${res.headers.get("Link")}`);
  return cursor;
};

describe("CURSOR_SECRET rotation", () => {
  it("a page cursor signed with the old secret is accepted during the rotation, refused after it", async () => {
    const { key } = await issueKey("pro");
    await createPets(key, [
      { name: "rot-1", categoryId: 1 },
      { name: "rot-2", categoryId: 1 },
      { name: "rot-3", categoryId: 1 },
    ]);
    const oldCursor = cursorOf(await call("/v1/pets?limit=1", { headers: auth(key) }));
    const page = (bindings: object, cursor: string) =>
      callWith(bindings, `/v1/pets?limit=1&cursor=${cursor}`, { headers: auth(key) });

    const during = await page(ROTATING, oldCursor);
    expect(during.status, await during.clone().text()).toBe(200);
    // What the page hands on is signed with the new secret: it works once the old one is gone.
    const newCursor = cursorOf(during);
    expect((await page(ROTATED, newCursor)).status).toBe(200);

    await expectError(await page(ROTATED, oldCursor), 400, "invalid_request");
  });

  it("a D1 bookmark signed with the old secret is accepted during the rotation, refused after it", async () => {
    const { key } = await issueKey("pro");
    const created = await postJson("/v1/pets", { name: "rot-bm", categoryId: 2 }, auth(key));
    expect(created.status).toBe(201);
    const oldBookmark = created.headers.get("x-d1-bookmark");
    expect(oldBookmark).toBeTruthy();
    const list = (bindings: object) =>
      callWith(bindings, "/v1/pets?limit=1", {
        headers: auth(key, { "x-d1-bookmark": oldBookmark! }),
      });

    const during = await list(ROTATING);
    expect(during.status, await during.clone().text()).toBe(200);
    await expectError(await list(ROTATED), 400, "invalid_request");
  });
});
