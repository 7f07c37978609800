// @ts-check
// The operator scripts as the README uses them: capturing a key in one line (deploy:* and rollback
// are tested in deploy.test.mjs).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { localApiForTests, ROOT } from "./helpers.mjs";

describe("npm run keys -- create --key-only", () => {
  const server = localApiForTests();

  it("prints only the new key, which then works", async () => {
    const run = spawnSync(
      process.execPath,
      [
        "scripts/keys.mjs",
        "create",
        "--name",
        "cli",
        "--plan",
        "pro",
        "--key-only",
        "--url",
        server.api.url,
        "--token",
        server.api.adminToken,
      ],
      { cwd: ROOT, encoding: "utf8" },
    );
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /^pet_test_[0-9A-Za-z]{43}_[0-9A-Za-z]{20}_[0-9a-f]{32}\n$/);
    const res = await fetch(`${server.api.url}/v1/pets`, {
      headers: { Authorization: `Bearer ${run.stdout.trim()}` },
    });
    assert.equal(res.status, 200);
  });

  it("sends --meta as written: a member name given twice is the API's 400, not the last value kept", () => {
    const run = spawnSync(
      process.execPath,
      [
        "scripts/keys.mjs",
        "create",
        "--name",
        "cli-meta",
        "--plan",
        "free",
        "--meta",
        '{"crm":"A-1","crm":"B-2"}',
        "--json",
        "--url",
        server.api.url,
        "--token",
        server.api.adminToken,
      ],
      { cwd: ROOT, encoding: "utf8" },
    );
    assert.equal(run.status, 1, run.stdout);
    assert.match(run.stderr, /meta: member \\"crm\\" is given more than once/);
  });

  it("refuses --key-only for other commands", () => {
    const run = spawnSync(
      process.execPath,
      ["scripts/keys.mjs", "list", "--key-only", "--url", server.api.url],
      { cwd: ROOT, encoding: "utf8" },
    );
    assert.equal(run.status, 2);
    assert.match(run.stderr, /--key-only is for create/);
  });
});

describe("npm run keys with a command line it cannot read", () => {
  for (const [option, args] of /** @type {Array<[string, string[]]>} */ ([
    ["--bogus", ["list", "--bogus"]],
    ["--grace", ["roll", "key_AAAAAAAAAAAAAAAAAAAA", "--grace", "-5"]],
  ])) {
    it(`${args.join(" ")}: exits 2 with what was wrong and the usage, no stack trace`, () => {
      const run = spawnSync(process.execPath, ["scripts/keys.mjs", ...args], {
        cwd: ROOT,
        encoding: "utf8",
      });
      assert.equal(run.status, 2, run.stderr);
      assert.match(run.stderr, new RegExp(`'${option}'`));
      assert.match(run.stderr, /^Usage: npm run keys -- <command>/m);
      assert.doesNotMatch(run.stderr, /\n\s+at /);
    });
  }
});

describe("npm run keys with a number option not written in decimal digits", () => {
  // Number("") is 0: `--grace "$GRACE"` with GRACE unset would roll with no grace period and end
  // the old secret at once. Each of these is a usage error, and nothing is sent (the --url is one
  // nothing listens on, so a request would exit 1 with "Cannot reach").
  for (const [option, value, args] of /** @type {Array<[string, string, string[]]>} */ ([
    ["--grace", "", ["roll", "key_AAAAAAAAAAAAAAAAAAAA"]],
    ["--grace", "0x10", ["roll", "key_AAAAAAAAAAAAAAAAAAAA"]],
    ["--grace", "1e3", ["webhook-roll", "whe_AAAAAAAAAAAAAAAAAAAA"]],
    ["--per-minute", " 12", ["create", "--name", "n", "--plan", "enterprise", "--per-day", "100"]],
    ["--per-day", "", ["create", "--name", "n", "--plan", "enterprise", "--per-minute", "10"]],
    [
      "--per-day",
      "1.5",
      ["set-plan", "key_AAAAAAAAAAAAAAAAAAAA", "--plan", "enterprise", "--per-minute", "10"],
    ],
  ])) {
    it(`${args[0]} ${option} ${JSON.stringify(value)}: exits 2 naming the option, sends nothing`, () => {
      const run = spawnSync(
        process.execPath,
        ["scripts/keys.mjs", ...args, option, value, "--url", "http://127.0.0.1:9", "--token", "t"],
        { cwd: ROOT, encoding: "utf8" },
      );
      assert.equal(run.status, 2, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(`^${option} must be a whole number in decimal digits`, "m"),
      );
      assert.match(run.stderr, /^Usage: npm run keys -- <command>/m);
    });
  }
});
