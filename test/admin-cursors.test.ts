// The operator API's page cursors: this release issues admin-v2, the values signed under
// CURSOR_SECRET for one list, and still reads admin-v1, the same values unsigned, which the
// release before issued (compat/release.json: a client may hold one across a deploy or a
// rollback). A signed cursor that was altered, made up, signed under another secret or for another
// list is a 400 with an Error body, never a 5xx; one signed under CURSOR_SECRET_PREVIOUS is
// accepted during a rotation, and new ones are signed under the current secret.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { fromBase64Url, toBase64Url } from "../src/lib/encoding";
import { type AdminList, encodeSignedCursor } from "../src/routes/admin/key-views";
import { ADMIN, call, callWith, expectError, issueKey, postJson } from "./helpers";
import { insertTestDelivery } from "./webhook-fixtures";

const SECRET = env.CURSOR_SECRET;
let endpointId = "";

/** Each paged list, its path (limit 1, so a next page exists) and where its cursor's values are. */
const LISTS: { list: AdminList; path: () => string }[] = [
  { list: "keys", path: () => "/admin/v1/keys?limit=1" },
  { list: "webhooks", path: () => "/admin/v1/webhooks?limit=1" },
  { list: "deliveries", path: () => `/admin/v1/webhooks/${endpointId}/deliveries?limit=1` },
  { list: "audit", path: () => "/admin/v1/audit?limit=1" },
  {
    list: "usage-day",
    path: () => `/admin/v1/usage?day=${new Date().toISOString().slice(0, 10)}&limit=1`,
  },
];

beforeAll(async () => {
  await issueKey("pro");
  await issueKey("pro");
  for (const url of ["https://hooks.example.com/a", "https://hooks.example.com/b"]) {
    const res = await postJson("/admin/v1/webhooks", { url, eventTypes: ["key.banned"] }, ADMIN);
    endpointId = ((await res.json()) as { id: string }).id;
  }
  // Stored straight in D1, not queued: a queued test event is attempted by the queue's consumer
  // about a second later, which would change a delivery between two reads of its page.
  for (let i = 0; i < 2; i++) await insertTestDelivery(endpointId);
});

async function page(path: string, bindings = {}) {
  const res = await callWith(bindings, path, { headers: ADMIN });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * The first page's cursor as issued (admin-v2: checked to be its values signed for `list` under
 * `secret`) and the same values unsigned (admin-v1, as the release before issued them).
 */
async function cursorsOf(list: AdminList, path: string, bindings = {}, secret = SECRET) {
  const first = await page(path, bindings);
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const v2 = first.body.nextCursor as string;
  expect(v2).toBeTruthy();
  const payload = fromBase64Url(v2).slice(0, -16);
  const values = JSON.parse(new TextDecoder().decode(payload));
  expect(v2).toBe(await encodeSignedCursor(secret, list, values));
  return { v1: toBase64Url(payload), v2 };
}

describe("signed (admin-v2) page cursors", () => {
  it.each(LISTS)(
    "$list: the cursor issued is signed for the list, and the unsigned one of the release before continues where it does",
    async ({ list, path }) => {
      const { v1, v2 } = await cursorsOf(list, path());
      const [a, b] = [await page(`${path()}&cursor=${v1}`), await page(`${path()}&cursor=${v2}`)];
      expect(b.status, JSON.stringify(b.body)).toBe(200);
      // The same page (a day not over is read live: its asOf is the time of reading).
      expect([b.body.data, b.body.nextCursor]).toEqual([a.body.data, a.body.nextCursor]);
    },
  );

  it.each(LISTS)(
    "$list: altered, foreign or another list's signed cursors are 400",
    async ({ list, path }) => {
      const { v2 } = await cursorsOf(list, path());
      const bytes = fromBase64Url(v2);
      const tagFlipped = bytes.slice();
      tagFlipped[tagFlipped.length - 1]! ^= 1;
      const valueFlipped = bytes.slice();
      valueFlipped[1]! ^= 1;
      const other = LISTS.find((l) => l.list !== list)!.list;
      const forged = [
        toBase64Url(tagFlipped),
        toBase64Url(valueFlipped),
        await encodeSignedCursor(
          "another-secret-entirely",
          list,
          JSON.parse(new TextDecoder().decode(bytes.slice(0, -16))),
        ),
        await encodeSignedCursor(
          SECRET,
          other,
          JSON.parse(new TextDecoder().decode(bytes.slice(0, -16))),
        ),
        `${v2}A`,
        "%%%",
      ];
      for (const cursor of forged) {
        const res = await call(`${path()}&cursor=${encodeURIComponent(cursor)}`, {
          headers: ADMIN,
        });
        const error = await expectError(res, 400, "invalid_request");
        expect(error.message, cursor).toMatch(/^cursor: /);
      }
    },
  );

  it("during a CURSOR_SECRET rotation a cursor signed under the previous secret is accepted", async () => {
    const { list, path } = LISTS[0]!;
    const { v2 } = await cursorsOf(list, path());
    const rotating = { CURSOR_SECRET: "a-new-cursor-secret", CURSOR_SECRET_PREVIOUS: SECRET };
    expect((await page(`${path()}&cursor=${v2}`, rotating)).status).toBe(200);
    const after = await page(`${path()}&cursor=${v2}`, { CURSOR_SECRET: "a-new-cursor-secret" });
    expect(after.status).toBe(400);
    // Cursors issued during the rotation are signed under the new secret.
    await cursorsOf(list, path(), rotating, "a-new-cursor-secret");
  });
});
