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
    assert.match(run.stdout, /^pet_test_[0-9A-Za-z]{43}\n$/);
    const res = await fetch(`${server.api.url}/v1/pets`, {
      headers: { Authorization: `Bearer ${run.stdout.trim()}` },
    });
    assert.equal(res.status, 200);
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
