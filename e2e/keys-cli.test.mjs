// @ts-check
// The operator CLI (scripts/keys.mjs) against the Worker under `wrangler dev`: every command,
// its exit code and what it prints. Run with `npm run test:cli`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { ROOT, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";
import { waitForRoomInDay } from "./helpers.mjs";

const run = promisify(execFile);

let api;

before(async () => {
  // Free ports, so that no other server (npm run dev, another test run) answers in its place.
  api = await startApiOnFreePorts({ localObservability: false });
});

after(async () => {
  await api?.stop();
});

/** Runs `npm run keys -- …args` as an operator would; resolves with exit code, stdout and stderr. */
async function keys(...args) {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      [path.join(ROOT, "scripts/keys.mjs"), ...args, "--url", api.url, "--token", api.adminToken],
      { cwd: ROOT },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    // execFile's error for a non-zero exit: the exit code and what the command printed.
    const err = /** @type {{ code: number, stdout: string, stderr: string }} */ (error);
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

async function keysJson(...args) {
  const result = await keys(...args);
  assert.equal(result.code, 0, `${args.join(" ")}: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

test("create with owner and meta, list with filters, roll, disable, enable, set-expiry, usage, usage-day, audit", async () => {
  const created = await keysJson(
    "create",
    "--name",
    "cli-acme",
    "--plan",
    "pro",
    "--owner",
    "acct-cli",
    "--meta",
    '{"crm":"X-1"}',
  );
  assert.match(created.key, /^pet_test_/);
  assert.equal(created.ownerId, "acct-cli");
  assert.deepEqual(created.meta, { crm: "X-1" });
  const id = created.id;

  const listed = await keysJson(
    "list",
    "--plan",
    "pro",
    "--state",
    "active",
    "--owner",
    "acct-cli",
    "--q",
    "cli-",
  );
  assert.deepEqual(
    listed.data.map((k) => k.id),
    [id],
  );
  assert.deepEqual((await keysJson("list", "--plan", "free", "--owner", "acct-cli")).data, []);

  // The two requests fall in one UTC day, the day whose usage is read back below.
  await waitForRoomInDay(60);
  const usedOn = new Date().toISOString().slice(0, 10);
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${api.url}/v1/pets?limit=1`, {
      headers: { Authorization: `Bearer ${created.key}` },
    });
    assert.equal(res.status, 200);
  }

  const rolled = await keysJson("roll", id, "--grace", "0");
  assert.equal(rolled.id, id);
  assert.notEqual(rolled.key, created.key);
  const old = await fetch(`${api.url}/v1/pets`, {
    headers: { Authorization: `Bearer ${created.key}` },
  });
  assert.equal(old.status, 401);

  assert.equal((await keysJson("disable", id)).status, "disabled");
  assert.equal(
    (await keysJson("list", "--state", "disabled", "--owner", "acct-cli")).data[0].id,
    id,
  );
  assert.equal((await keysJson("enable", "--id", id)).status, "active");
  assert.equal(
    (await keysJson("set-expiry", id, "--expires", "2099-01-01")).expiresAt,
    "2099-01-01T00:00:00.000Z",
  );
  assert.equal((await keysJson("set-expiry", id, "--expires", "none")).expiresAt, null);
  assert.equal((await keysJson("set-owner", id, "--owner", "none")).ownerId, null);
  assert.deepEqual((await keysJson("set-meta", id, "--meta", '{"seats":3}')).meta, { seats: 3 });

  const usage = await keysJson("usage", id, "--from", usedOn, "--to", usedOn);
  assert.deepEqual(usage.data, [
    {
      day: usedOn,
      admitted: 2,
      refused: { rate_limited: 0, quota_exceeded: 0, key_banned: 0 },
      stranded: 0,
    },
  ]);
  const csv = await keys("usage", id, "--from", usedOn, "--to", usedOn, "--csv");
  assert.equal(csv.code, 0);
  assert.equal(
    csv.stdout,
    `"day","admitted","rate_limited","quota_exceeded","key_banned","stranded"\r\n"${usedOn}","2","0","0","0","0"\r\n`,
  );

  // The day's listing has the key's totals (today's read live from its quota object), and
  // says when today's totals are the day so far.
  const invoice = await keys("usage-day", "--day", usedOn, "--csv", "--limit", "100");
  assert.equal(invoice.code, 0);
  if (usedOn === new Date().toISOString().slice(0, 10))
    assert.match(
      invoice.stderr,
      new RegExp(
        `^${usedOn} is not over: these totals are the day so far, as of \\d\\d:\\d\\d UTC\\.`,
      ),
    );
  assert.ok(
    invoice.stdout
      .split("\r\n")
      .includes(`"${id}","cli-acme","pro","","${usedOn}","2","0","0","0","0"`),
    invoice.stdout,
  );

  const audit = await keysJson("audit", id);
  assert.deepEqual(
    audit.data.map((e) => e.action),
    ["update", "update", "update", "update", "enable", "disable", "roll", "create"],
  );
  assert.ok(audit.data.every((e) => e.actor === "admin" && e.keyId === id));
  assert.ok(
    !JSON.stringify(audit).includes(created.key) && !JSON.stringify(audit).includes(rolled.key),
  );
});

test("region: set on create, shown by get, changed and cleared by set-region; a wrong one is refused with the list", async () => {
  const created = await keysJson("create", "--name", "cli-eu", "--plan", "pro", "--region", "weur");
  assert.equal(created.region, "weur");
  assert.equal((await keysJson("get", created.id)).region, "weur");
  assert.equal((await keysJson("set-region", created.id, "--region", "apac")).region, "apac");
  assert.equal((await keysJson("set-region", created.id, "--region", "none")).region, null);
  const wrong = await keys("set-region", created.id, "--region", "mars");
  assert.equal(wrong.code, 1);
  const error = JSON.parse(wrong.stderr);
  assert.equal(error.code, "invalid_request");
  assert.match(error.message, /region: must be one of: wnam, enam, .*weur/);
  assert.equal((await keysJson("get", created.id)).region, null);
  assert.equal((await keys("set-region", created.id)).code, 2);
});

test("errors: the API's Error body on stderr and exit 1; usage mistakes exit 2", async () => {
  const reversed = await keys(
    "usage",
    "key_AAAAAAAAAAAAAAAAAAAA",
    "--from",
    "2030-01-02",
    "--to",
    "2030-01-01",
  );
  assert.equal(reversed.code, 1);
  assert.equal(JSON.parse(reversed.stderr).code, "invalid_request");
  const unknown = await keys("disable", "key_AAAAAAAAAAAAAAAAAAAA");
  assert.equal(unknown.code, 1);
  assert.equal(JSON.parse(unknown.stderr).code, "not_found");
  const badFilter = await keys("list", "--state", "paused");
  assert.equal(badFilter.code, 1);
  assert.match(JSON.parse(badFilter.stderr).message, /state/);
  assert.equal((await keys("roll")).code, 2);
  assert.equal((await keys("usage-day")).code, 2);
  assert.equal((await keys("set-meta", "key_AAAAAAAAAAAAAAAAAAAA", "--meta", "{nope")).code, 2);
  assert.equal((await keys("frobnicate")).code, 2);
});

test("a table for a person (--table, as on a terminal), JSON for a script (--json, or a pipe)", async () => {
  const created = await keysJson("create", "--name", "cli-table", "--plan", "free");
  const shown = await keys("get", created.id, "--table");
  assert.equal(shown.code, 0, shown.stderr);
  const lines = shown.stdout.trimEnd().split("\n");
  assert.match(lines[0] ?? "", /^field\s+value$/);
  assert.ok(
    lines.some((line) => /^name\s+cli-table$/.test(line)),
    shown.stdout,
  );
  assert.ok(
    lines.some((line) => /^limits\.perMinute\s+60$/.test(line)),
    shown.stdout,
  );

  const listed = await keys("list", "--q", "cli-table", "--table");
  assert.equal(listed.code, 0, listed.stderr);
  const [header, rule, row] = listed.stdout.trimEnd().split("\n");
  assert.deepEqual(header?.split(/\s{2,}/), [
    "id",
    "name",
    "plan",
    "status",
    "owner",
    "today",
    "last used",
    "banned until",
  ]);
  assert.match(rule ?? "", /^─+( +─+)+$/);
  assert.ok(row?.startsWith(created.id), listed.stdout);
  assert.match(row ?? "", /\bcli-table\s+free\s+active\s+0\/1000\b/);

  const none = await keys("list", "--q", "no-such-key-name", "--table");
  assert.equal(none.stdout.trim(), "(none)");

  const refused = await keys("disable", "key_AAAAAAAAAAAAAAAAAAAA", "--table");
  assert.equal(refused.code, 1);
  assert.match(refused.stderr.trim(), /^404 not_found: /);

  // Piped without a flag (as here), or with --json: the API's JSON, unchanged.
  assert.equal((await keysJson("get", created.id, "--json")).id, created.id);
  assert.equal((await keys("get", created.id, "--json", "--table")).code, 2);
});

test("a table with a next page says so on stderr (More: --cursor …), as the CSV does", async () => {
  for (const n of [1, 2, 3]) await keysJson("create", "--name", `cli-pages-${n}`, "--plan", "free");
  for (const n of [1, 2])
    await keysJson(
      "webhook-create",
      `https://hooks.example.com/pages-${n}`,
      "--events",
      "key.banned",
      "--owner",
      "acct-pages",
    );
  const today = new Date().toISOString().slice(0, 10);
  const paged = [
    ["list", "--q", "cli-pages-", "--limit", "2"],
    ["audit", "--limit", "1"],
    ["usage-day", "--day", today, "--limit", "1"],
    ["webhook-list", "--owner", "acct-pages", "--limit", "1"],
  ];
  for (const args of paged) {
    const { nextCursor } = await keysJson(...args);
    assert.ok(nextCursor, `${args.join(" ")}: a next page`);
    const table = await keys(...args, "--table");
    assert.equal(table.code, 0, table.stderr);
    assert.ok(
      table.stderr.split("\n").includes(`More: --cursor ${nextCursor}`),
      `${args.join(" ")}: ${table.stderr}`,
    );
  }
  const lastPage = await keysJson("list", "--q", "cli-pages-", "--limit", "3");
  assert.equal(lastPage.nextCursor, null);
  const lastTable = await keys("list", "--q", "cli-pages-", "--limit", "3", "--table");
  assert.doesNotMatch(lastTable.stderr, /More:/);
});

test("webhook endpoints: create (secret once), list by owner, get, update, disable, enable, roll, delete", async () => {
  const created = await keys(
    "webhook-create",
    "https://hooks.example.com/cli",
    "--events",
    "quota.day.warning, quota.day.exhausted",
    "--owner",
    "acct-hooks",
    "--description",
    "billing alerts",
  );
  assert.equal(created.code, 0, created.stderr);
  const endpoint = JSON.parse(created.stdout);
  assert.match(endpoint.id, /^whe_[0-9A-Za-z]{20}$/);
  assert.match(endpoint.secret, /^whsec_/);
  assert.deepEqual(endpoint.eventTypes, ["quota.day.warning", "quota.day.exhausted"]);
  assert.equal(endpoint.ownerId, "acct-hooks");
  assert.equal(endpoint.description, "billing alerts");
  assert.match(created.stderr, /Store the signing secret \("secret"\) now: it is shown only once/);
  const id = endpoint.id;

  const other = await keysJson(
    "webhook-create",
    "https://hooks.example.com/everyone",
    "--events",
    "key.banned",
    "--all-owners",
  );
  assert.equal(other.ownerId, null);
  const listed = await keysJson("webhook-list", "--owner", "acct-hooks");
  assert.deepEqual(
    listed.data.map((e) => e.id),
    [id],
  );
  assert.ok(listed.data.every((e) => !("secret" in e)));
  const shown = await keysJson("webhook-get", id);
  assert.equal(shown.url, "https://hooks.example.com/cli");
  assert.equal(shown.secret, undefined);

  const updated = await keysJson(
    "webhook-update",
    id,
    "--events",
    "key.revoked",
    "--hook-url",
    "https://hooks.example.com/cli-2",
    "--description",
    "none",
  );
  assert.deepEqual(updated.eventTypes, ["key.revoked"]);
  assert.equal(updated.url, "https://hooks.example.com/cli-2");
  assert.equal(updated.description, null);
  assert.equal(updated.ownerId, "acct-hooks");
  assert.equal((await keysJson("webhook-update", "--id", id, "--all-owners")).ownerId, null);

  const disabled = await keysJson("webhook-disable", id);
  assert.equal(disabled.enabled, false);
  assert.equal(disabled.disabledReason, "disabled by an operator");
  assert.equal((await keysJson("webhook-enable", id)).enabled, true);

  const rolled = await keys("webhook-roll", id, "--grace", "3600");
  assert.equal(rolled.code, 0, rolled.stderr);
  const roll = JSON.parse(rolled.stdout);
  assert.match(roll.secret, /^whsec_/);
  assert.notEqual(roll.secret, endpoint.secret);
  const graceLeft = Date.parse(roll.previousSecretExpiresAt) - Date.parse(roll.secretRolledAt);
  assert.equal(graceLeft, 3_600_000);
  assert.match(rolled.stderr, /shown only once/);

  const deleted = await keys("webhook-delete", id);
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.equal(deleted.stdout, "");
  assert.match(deleted.stderr, new RegExp(`^Deleted ${id} and its delivery log\\.`));
  const gone = await keys("webhook-get", id);
  assert.equal(gone.code, 1);
  assert.equal(JSON.parse(gone.stderr).code, "not_found");
});

test("webhook endpoints as tables: the signing secret printed once, apart; every owner in words", async () => {
  const created = await keys(
    "webhook-create",
    "https://hooks.example.com/table",
    "--events",
    "key.banned,key.unbanned",
    "--all-owners",
    "--table",
  );
  assert.equal(created.code, 0, created.stderr);
  const secret = /^ {2}(whsec_\S+)$/m.exec(created.stdout)?.[1];
  assert.ok(secret, created.stdout);
  assert.equal(created.stdout.split(secret).length, 2, "the secret is printed exactly once");
  assert.match(
    created.stdout,
    /\n\nSigning secret \(shown only this once; the receiver verifies signatures with it\):\n\n {2}whsec_/,
  );
  const lines = created.stdout.split("\n");
  assert.match(lines[0] ?? "", /^field\s+value$/);
  assert.ok(
    lines.some((line) => /^eventTypes\s+key\.banned, key\.unbanned$/.test(line)),
    created.stdout,
  );
  assert.ok(
    lines.some((line) => /^ownerId\s+\(every owner\)$/.test(line)),
    created.stdout,
  );
  assert.ok(!lines.some((line) => /^secret\s/.test(line)), created.stdout);
  const id = /^id\s+(whe_\w+)$/m.exec(created.stdout)?.[1];
  assert.ok(id, created.stdout);

  await keysJson("webhook-disable", id);
  const listed = await keys("webhook-list", "--table", "--limit", "100");
  assert.equal(listed.code, 0, listed.stderr);
  const [header, rule, ...rows] = listed.stdout.trimEnd().split("\n");
  assert.deepEqual(header?.split(/\s{2,}/), ["id", "url", "owner", "events", "state"]);
  assert.match(rule ?? "", /^─+( +─+)+$/);
  const row = rows.find((r) => r.startsWith(id));
  assert.ok(row, listed.stdout);
  assert.deepEqual(row.split(/\s{2,}/), [
    id,
    "https://hooks.example.com/table",
    "(every owner)",
    "key.banned, key.unbanned",
    "disabled: disabled by an operator",
  ]);

  const rolled = await keys("webhook-roll", id, "--grace", "0", "--table");
  assert.equal(rolled.code, 0, rolled.stderr);
  const newSecret = /^ {2}(whsec_\S+)$/m.exec(rolled.stdout)?.[1];
  assert.ok(newSecret && newSecret !== secret, rolled.stdout);
  assert.equal(rolled.stdout.split(newSecret).length, 2);
});

test("webhook commands: the API's 400 for a bad URL or event type; usage mistakes exit 2", async () => {
  const plain = await keys(
    "webhook-create",
    "http://hooks.example.com/x",
    "--events",
    "key.banned",
    "--all-owners",
  );
  assert.equal(plain.code, 1);
  assert.equal(JSON.parse(plain.stderr).code, "invalid_request");
  assert.match(JSON.parse(plain.stderr).message, /^url: /);
  const unknownType = await keys(
    "webhook-create",
    "https://hooks.example.com/x",
    "--events",
    "key.exploded",
    "--all-owners",
  );
  assert.equal(unknownType.code, 1);
  assert.match(JSON.parse(unknownType.stderr).message, /eventTypes.*quota\.day\.warning/);

  const usage = [
    // No owner and no --all-owners: never every owner's events by omission.
    ["webhook-create", "https://hooks.example.com/x", "--events", "key.banned"],
    [
      "webhook-create",
      "https://hooks.example.com/x",
      "--events",
      "key.banned",
      "--owner",
      "a",
      "--all-owners",
    ],
    ["webhook-create", "https://hooks.example.com/x", "--all-owners"],
    ["webhook-create", "--events", "key.banned", "--all-owners"],
    ["webhook-get"],
    ["webhook-roll"],
    ["webhook-delete"],
  ];
  for (const args of usage) {
    const run = await keys(...args);
    assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
    assert.match(run.stderr, /Usage: npm run keys/);
  }
  const listed = await keysJson("webhook-list", "--limit", "100");
  assert.ok(!listed.data.some((e) => e.url === "https://hooks.example.com/x"));
});

test("webhook delivery log: webhook-test queues a test event, webhook-deliveries lists it, webhook-resend sends it again", async () => {
  const endpoint = await keysJson(
    "webhook-create",
    "https://hooks.example.com/deliveries",
    "--events",
    "key.banned",
    "--all-owners",
  );
  const queued = await keysJson("webhook-test", endpoint.id);
  assert.equal(queued.eventType, "webhook.test");
  assert.match(queued.id, /^whd_[0-9A-Za-z]{20}$/);
  const log = await keysJson("webhook-deliveries", endpoint.id);
  assert.deepEqual(
    log.data.map((d) => [d.id, d.eventId]),
    [[queued.id, queued.eventId]],
  );
  const again = await keysJson("webhook-resend", endpoint.id, "--delivery", queued.id);
  assert.equal(again.id, queued.id);
  assert.equal(again.eventId, queued.eventId);

  const table = await keys("webhook-deliveries", endpoint.id, "--table");
  assert.equal(table.code, 0, table.stderr);
  const [header, , row] = table.stdout.trimEnd().split("\n");
  assert.deepEqual(header?.split(/\s{2,}/), [
    "id",
    "event",
    "event id",
    "status",
    "attempts",
    "response",
    "latency ms",
    "queued",
    "error",
  ]);
  assert.ok(row?.startsWith(`${queued.id}  webhook.test  ${queued.eventId}`), table.stdout);

  assert.equal((await keys("webhook-resend", endpoint.id)).code, 2);
  const unknown = await keys(
    "webhook-resend",
    endpoint.id,
    "--delivery",
    "whd_AAAAAAAAAAAAAAAAAAAA",
  );
  assert.equal(unknown.code, 1);
  assert.equal(JSON.parse(unknown.stderr).code, "not_found");
});
