// The operator scripts as the README uses them: capturing a key in one line, and deploy:* refusing
// placeholder configuration and reporting a missing login as a missing login.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
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

describe("npm run deploy:*", () => {
  // No Cloudflare credentials: an empty home, no API token.
  let home;
  const env = () => {
    const e = {
      ...process.env,
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, ".config"),
      WRANGLER_SEND_METRICS: "false",
    };
    delete e.CLOUDFLARE_API_TOKEN;
    delete e.CLOUDFLARE_API_KEY;
    return e;
  };
  before(() => {
    home = mkdtempSync(path.join(tmpdir(), "animal-store-home-"));
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  for (const target of ["staging", "production"]) {
    it(`${target}: refuses the placeholder database_id before anything else`, () => {
      const run = spawnSync(process.execPath, ["scripts/deploy.mjs", target], {
        cwd: ROOT,
        encoding: "utf8",
        env: env(),
      });
      assert.equal(run.status, 1);
      assert.match(run.stderr, /placeholder database_id/);
      assert.match(run.stderr, new RegExp(`d1 create animal-store-${target}`));
    });
  }

  /** deploy.mjs staging in a copy of the project whose wrangler.toml is `edit`ed. */
  function deployWith(edit) {
    const dir = mkdtempSync(path.join(tmpdir(), "animal-store-deploy-"));
    try {
      const toml = edit(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"));
      writeFileSync(path.join(dir, "wrangler.toml"), toml);
      mkdirSync(path.join(dir, "scripts"));
      copyFileSync(path.join(ROOT, "scripts/deploy.mjs"), path.join(dir, "scripts/deploy.mjs"));
      symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
      return spawnSync(process.execPath, ["scripts/deploy.mjs", "staging"], {
        cwd: dir,
        encoding: "utf8",
        env: env(),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const realIds = (toml) =>
    toml.replace(/database_id = "[^"]+"/g, () => `database_id = "${randomUUID()}"`);

  it("refuses an empty or example.* PUBLIC_ORIGIN", () => {
    const empty = deployWith(realIds);
    assert.equal(empty.status, 1);
    assert.match(empty.stderr, /PUBLIC_ORIGIN is empty/);
    const example = deployWith((t) =>
      realIds(t).replace(/PUBLIC_ORIGIN = "[^"]*"/g, 'PUBLIC_ORIGIN = "https://api.example.com"'),
    );
    assert.equal(example.status, 1);
    assert.match(example.stderr, /PUBLIC_ORIGIN is the placeholder https:\/\/api\.example\.com/);
  });

  it("with real-looking configuration, reports a missing login as a missing login", () => {
    const run = deployWith((t) =>
      realIds(t).replace(
        /PUBLIC_ORIGIN = "[^"]*"/g,
        'PUBLIC_ORIGIN = "https://pets.animal-store.dev"',
      ),
    );
    assert.equal(run.status, 1);
    assert.match(run.stderr, /not logged in/);
    assert.match(run.stderr, /wrangler -- login/);
    assert.match(run.stderr, /CLOUDFLARE_API_TOKEN/);
    assert.doesNotMatch(run.stderr, /secret/i);
  });
});
