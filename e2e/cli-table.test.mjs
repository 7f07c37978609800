// @ts-check
// The keys CLI's tables (scripts/lib/cli-table.mjs) print what the API stored, which operators
// and receivers wrote: a value must not be able to drive the terminal (an escape sequence that
// recolours, retitles or clears it) or break the table (a line break that starts a fake row).
import assert from "node:assert/strict";
import { test } from "node:test";
import { tableOf } from "../scripts/lib/cli-table.mjs";

const HOSTILE = "a\u001b[31mRED\u001b]0;title\u0007\nfake-field  x\r\u0085\u009b2J\u202eb\u2028c";

test("a record's fields: control characters, bidi overrides and line separators are shown escaped", () => {
  const table = tableOf("webhook-get", {
    id: "whe_x",
    description: HOSTILE,
    meta: { note: HOSTILE },
  });
  assert.doesNotMatch(
    table,
    /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u2028\u2029]/,
  );
  const lines = table.split("\n");
  assert.equal(lines.length, 2 + 3, table);
  assert.ok(
    lines.some((line) =>
      line.endsWith(
        "a\\u001b[31mRED\\u001b]0;title\\u0007\\nfake-field  x\\r\\u0085\\u009b2J\\u202eb\\u2028c",
      ),
    ),
    table,
  );
});

test("a list's rows and an audit entry's changes stay one line each, escaped", () => {
  const table = tableOf("audit", {
    data: [
      {
        at: "t",
        actor: "admin",
        action: "webhook_update",
        keyId: "whe_x",
        changes: { description: { before: null, after: HOSTILE } },
      },
    ],
  });
  assert.equal(table.split("\n").length, 3, table);
  assert.doesNotMatch(table, /[\u001b\u0007\u009b\u202e\u2028]/);
});

test("ordinary text is printed as it is", () => {
  const table = tableOf("get", { name: "Zoë 👨‍👩‍👧 café", ownerId: "acct_42" });
  assert.match(table, /^name\s+Zoë 👨‍👩‍👧 café$/m);
});

test("columns stay aligned after wide, combining, zero-width and emoji characters", () => {
  const names = [
    "宠物店 wide",
    "e\u0301\u0301 combining",
    "a\u200b\u200bzw",
    "family 👨‍👩‍👧",
    "flag 🇳🇱 ok",
    "plain",
  ];
  const table = tableOf("list", {
    data: names.map((name, i) => ({ id: `key_${i}`, name, plan: "free", status: "active" })),
  });
  const [header, , ...rows] = table.split("\n");
  // Where the plan column starts on screen: terminals show East Asian wide characters and emoji
  // presentation in two columns, combining marks and zero-width characters in none.
  const planColumn = (/** @type {string} */ line) => {
    const before = line.slice(0, line.indexOf("free"));
    return [...new Intl.Segmenter().segment(before)].reduce((width, { segment }) => {
      if (/^[\p{Mn}\p{Me}\p{Cf}]+$/u.test(segment)) return width;
      return (
        width +
        (/[\u3000-\u9fff]|\p{Extended_Pictographic}|\p{Regional_Indicator}/u.test(segment) ? 2 : 1)
      );
    }, 0);
  };
  assert.equal(rows.length, names.length);
  for (const row of rows) assert.equal(planColumn(row), header.indexOf("plan"), table);
});
