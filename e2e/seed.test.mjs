// @ts-check
// `npm run seed` against a fresh local store: it applies the migrations and adds the sample pets
// once; a second run adds nothing.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { localApiForTests, projectNode22, ROOT } from "./helpers.mjs";

const store = mkdtempSync(path.join(tmpdir(), "animal-store-seed-"));
after(() => rmSync(store, { recursive: true, force: true }));

const env = {
  ...process.env,
  PATH: `${path.join(ROOT, "node_modules/.bin")}${path.delimiter}${process.env.PATH}`,
};
const seed = () =>
  execFileSync(projectNode22(), ["scripts/seed.mjs", "--persist-to", store], {
    cwd: ROOT,
    env,
    encoding: "utf8",
  });

function pets() {
  const out = execFileSync(
    "wrangler",
    [
      "d1",
      "execute",
      "DB",
      "--local",
      "--persist-to",
      store,
      "--json",
      "--command",
      "SELECT name, status FROM pets ORDER BY id",
    ],
    { cwd: ROOT, env: { ...env, WRANGLER_SEND_METRICS: "false" }, encoding: "utf8" },
  );
  return JSON.parse(out)[0].results;
}

test("npm run seed fills an empty local store with sample pets, once", () => {
  assert.match(seed(), /^Added 12 sample pets/m);
  const first = pets();
  assert.equal(first.length, 12);
  assert.deepEqual(first[0], { name: "Rex", status: "available" });
  assert.deepEqual(new Set(first.map((p) => p.status)), new Set(["available", "pending", "sold"]));
  assert.match(seed(), /already holds 12 pets; nothing added/);
  assert.equal(pets().length, 12);
});

test("npm run seed -- --help prints its usage instead of running wrangler", () => {
  for (const flag of ["--help", "-h"]) {
    const out = execFileSync(projectNode22(), ["scripts/seed.mjs", flag], {
      cwd: ROOT,
      env,
      encoding: "utf8",
    });
    assert.match(out, /^Usage: npm run seed/);
    assert.match(out, /--persist-to DIR/);
  }
});

test("npm run seed with an unknown option prints the usage and exits 2, running nothing", () => {
  const run = spawnSync(projectNode22(), ["scripts/seed.mjs", "--bogus"], {
    cwd: ROOT,
    env,
    encoding: "utf8",
  });
  assert.equal(run.status, 2);
  assert.match(run.stderr, /^Unknown option '--bogus'\nUsage: npm run seed/);
  assert.equal(run.stdout, "");
});

describe("npm run seed -- --url URL: through the API", () => {
  const server = localApiForTests();
  /** Runs seed asynchronously: the server answers from this same process's children. */
  const seedAt = (args) =>
    new Promise((resolve) => {
      /** @type {NodeJS.ProcessEnv} */
      const childEnv = { ...env };
      delete childEnv.ADMIN_TOKEN;
      const child = spawn(projectNode22(), ["scripts/seed.mjs", ...args], {
        cwd: ROOT,
        env: childEnv,
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("exit", (status) => resolve({ status, stdout, stderr }));
    });
  const admin = async (path, init = {}) => {
    const res = await fetch(`${server.api.url}${path}`, {
      ...init,
      headers: {
        Authorization: `Bearer ${server.api.adminToken}`,
        "Content-Type": "application/json",
      },
    });
    return { status: res.status, body: /** @type {any} */ (await res.json()) };
  };

  test("adds the sample pets once, with one reused key that is disabled afterwards", async () => {
    const first = await seedAt(["--url", server.api.url, "--token", server.api.adminToken]);
    assert.equal(first.status, 0, first.stdout + first.stderr);
    assert.match(first.stdout, /^Added 12 sample pets to http:\/\/127\.0\.0\.1:\d+\.$/m);
    const second = await seedAt(["--url", server.api.url, "--token", server.api.adminToken]);
    assert.equal(second.status, 0, second.stdout + second.stderr);
    assert.match(second.stdout, /already holds pets; nothing added\./);

    const keys = (await admin("/admin/v1/keys?q=seed&limit=100")).body.data;
    assert.deepEqual(
      keys.map((k) => [k.name, k.status]),
      [["seed", "disabled"]],
    );
    const reader = await admin("/admin/v1/keys", {
      method: "POST",
      body: JSON.stringify({ name: "seed-test-reader", plan: "free" }),
    });
    assert.equal(reader.status, 201);
    const pets = /** @type {Array<{ name: string }>} */ (
      await fetch(`${server.api.url}/v1/pets?limit=100`, {
        headers: { Authorization: `Bearer ${reader.body.key}` },
      }).then((r) => r.json())
    );
    assert.equal(pets.length, 12);
    assert.deepEqual(pets.map((p) => p.name).sort(), [
      "Bella",
      "Bubbles",
      "Hazel",
      "Kiwi",
      "Luna",
      "Max",
      "Milo",
      "Nala",
      "Nemo",
      "Pip",
      "Rex",
      "Rio",
    ]);
  });

  test("says why it cannot: a read-only token, a URL that does not answer, bad arguments", async () => {
    const readOnly = await seedAt(["--url", server.api.url, "--token", server.api.readToken]);
    assert.equal(readOnly.status, 1);
    assert.match(readOnly.stderr, /✗ Not seeded: could not issue the seed key/);
    assert.match(readOnly.stderr, /got 403/);

    const silent = await seedAt(["--url", "http://127.0.0.1:9", "--token", "whatever-token"]);
    assert.equal(silent.status, 1);
    assert.match(silent.stderr, /http:\/\/127\.0\.0\.1:9\/admin\/v1\/keys.* did not answer/);

    const noToken = await seedAt(["--url", "https://api.animal-store.dev"]);
    assert.equal(noToken.status, 2);
    assert.match(
      noToken.stderr,
      /No admin token for https:\/\/api\.animal-store\.dev: pass --token/,
    );

    const both = await seedAt(["--url", server.api.url, "--persist-to", store]);
    assert.equal(both.status, 2);
    assert.match(both.stderr, /--url and --persist-to exclude each other/);
  });
});
