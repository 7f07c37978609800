// @ts-check
// `npm run smoke` against the API under `wrangler dev`: every check passes, and runs in a row reuse
// one `smoke-test` key, disabled between runs; a refused admin token, a URL that does not answer and
// a missing token each fail with the check named and a non-zero exit.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { localApiForTests, ROOT } from "./helpers.mjs";

const SMOKE = path.join(ROOT, "scripts/smoke.mjs");

/** Runs the smoke script (asynchronously: the server answers from this same process's children). */
/**
 * @param {string[]} args
 * @param {{ env?: Record<string, string>, cwd?: string }} [options]
 * @returns {Promise<{ status: number | null, stdout: string, stderr: string }>}
 */
function smoke(args, { env = {}, cwd = ROOT } = {}) {
  const childEnv = { ...process.env, ...env };
  if (!("ADMIN_TOKEN" in env)) delete childEnv.ADMIN_TOKEN;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SMOKE, ...args], { cwd, env: childEnv });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * The keys whose name contains "smoke", as the admin API lists them.
 * @param {{ url: string, adminToken: string }} api
 * @returns {Promise<Array<{ id: string, name: string, status: string }>>}
 */
async function smokeKeys(api) {
  const res = await fetch(`${api.url}/admin/v1/keys?q=smoke&limit=100`, {
    headers: { Authorization: `Bearer ${api.adminToken}` },
  });
  assert.equal(res.status, 200);
  return /** @type {{ data: Array<{ id: string, name: string, status: string }> }} */ (
    await res.json()
  ).data;
}

describe("npm run smoke", () => {
  const server = localApiForTests();

  it("passes every check against wrangler dev; runs in a row leave one smoke-test key, disabled", async () => {
    /** @type {string | undefined} */
    let keyId;
    for (const round of [1, 2]) {
      const run = await smoke(["--url", server.api.url, "--token", server.api.adminToken]);
      assert.equal(run.status, 0, `run ${round}: ${run.stdout}${run.stderr}`);
      for (const check of [
        "OpenAPI document",
        "enable the smoke key",
        "authenticated list",
        "rate-limit headers",
        "401 without a key",
        "/docs",
        "disable the smoke key",
      ])
        assert.match(run.stdout, new RegExp(`✓ ${check.replace("/", "\\/")}\\n`));
      assert.match(run.stdout, /all 7 checks passed/);
      const keys = await smokeKeys(server.api);
      assert.deepEqual(
        keys.map((k) => [k.name, k.status]),
        [["smoke-test", "disabled"]],
        `after run ${round}`,
      );
      keyId ??= keys[0].id;
      assert.equal(keys[0].id, keyId, "the second run reuses the first run's key");
    }
  });

  it("takes the token from $ADMIN_TOKEN, and for a local URL from .dev.vars", async () => {
    const fromEnv = await smoke(["--url", server.api.url], {
      env: { ADMIN_TOKEN: server.api.adminToken },
    });
    assert.equal(fromEnv.status, 0, fromEnv.stdout + fromEnv.stderr);
    const dir = mkdtempSync(path.join(tmpdir(), "animal-store-smoke-"));
    try {
      writeFileSync(path.join(dir, ".dev.vars"), `ADMIN_TOKEN=${server.api.adminToken}\n`);
      const fromDevVars = await smoke(["--url", server.api.url], { cwd: dir });
      assert.equal(fromDevVars.status, 0, fromDevVars.stdout + fromDevVars.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a read-only admin token fails at enabling the smoke key (403)", async () => {
    const run = await smoke(["--url", server.api.url, "--token", server.api.readToken]);
    assert.equal(run.status, 1);
    assert.match(
      run.stderr,
      /✗ enable the smoke key: smoke-test: [A-Z]+ \/admin\/v1\/keys\S*: expected 20[01], got 403/,
    );
    assert.match(run.stderr, /FAILED at "enable the smoke key"/);
  });

  it("a URL that does not answer fails the first check", async () => {
    // The server's own port once it is stopped would race; a port nothing listens on is enough.
    const run = await smoke(["--url", "http://127.0.0.1:9", "--token", "whatever-token"]);
    assert.equal(run.status, 1);
    assert.match(
      run.stderr,
      /✗ OpenAPI document: http:\/\/127\.0\.0\.1:9\/v1\/openapi\.json did not answer/,
    );
  });

  it("--help prints the usage and exits 0; an unknown option exits 2 with the usage", async () => {
    for (const flag of ["--help", "-h"]) {
      const help = await smoke([flag]);
      assert.equal(help.status, 0, help.stderr);
      assert.match(help.stdout, /^Usage: npm run smoke -- --url URL \[--token ADMIN_TOKEN\]\n/);
      assert.match(help.stdout, /Exit codes: 0 every check passed/);
    }
    const unknown = await smoke(["--url", server.api.url, "--bogus"]);
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /Unknown option '--bogus'\nUsage: npm run smoke/);
    assert.equal(unknown.stdout, "");
  });

  it("without a token for a remote URL, or without --url, exits 2 saying what is missing", async () => {
    const noToken = await smoke(["--url", "https://api.animal-store.dev"]);
    assert.equal(noToken.status, 2);
    assert.match(noToken.stderr, /No admin token: pass --token or set ADMIN_TOKEN\./);
    const noUrl = await smoke([]);
    assert.equal(noUrl.status, 2);
    assert.match(noUrl.stderr, /--url is required/);
  });
});
