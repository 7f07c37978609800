// The operator CLI (scripts/keys.mjs) against the Worker under `wrangler dev`: every command,
// its exit code and what it prints. Run with `npm run test:cli`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { ROOT, startApi } from "../scripts/lib/local-server.mjs";
import { waitForRoomInDay } from "./helpers.mjs";

// This test's own ports, apart from `npm run dev` (8787) and the console's browser test (8840).
const PORT = Number(process.env.CLI_TEST_PORT ?? 8841);
const INSPECTOR_PORT = Number(process.env.CLI_TEST_INSPECTOR_PORT ?? 9341);
const run = promisify(execFile);

let api;

before(async () => {
  api = await startApi({ port: PORT, inspectorPort: INSPECTOR_PORT, localObservability: false });
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
  } catch (err) {
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
