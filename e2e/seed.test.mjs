// `npm run seed` against a fresh local store: it applies the migrations and adds the sample pets
// once; a second run adds nothing.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { projectNode22, ROOT } from "./helpers.mjs";

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
