#!/usr/bin/env node
// @ts-check
// The client package as it would be published, checked by the tools its users' toolchains rely
// on: packs packages/client as built (`npm run build` first; the pack skips the prepack build)
// and runs arethetypeswrong (every entry point resolves, with types, from `import` and `require`
// under node10, node16 and bundler resolution) and publint --strict (package.json fields, exports
// and files agree) on the tarball. Exits non-zero on any problem either reports.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const ROOT = path.join(import.meta.dirname, "..");
const CLIENT = path.join(ROOT, "packages/client");
/** The script behind `node_modules/.bin/<name>`, run with this Node rather than its shebang's. */
const bin = (name) => realpathSync(path.join(ROOT, "node_modules/.bin", name));

if (!existsSync(path.join(CLIENT, "dist/index.cjs"))) {
  console.error("✗ packages/client/dist is missing: run `npm run build` first");
  process.exit(1);
}
const dir = mkdtempSync(path.join(tmpdir(), "animal-store-client-pack-"));
let failed = false;
try {
  const pack = spawnSync(
    "npm",
    ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir],
    {
      cwd: CLIENT,
      encoding: "utf8",
    },
  );
  if (pack.status !== 0) throw new Error(`npm pack failed:\n${pack.stderr}`);
  const tarball = path.join(dir, readdirSync(dir).find((f) => f.endsWith(".tgz")) ?? "");
  /** @type {Array<[string, string[]]>} */
  const checks = [
    ["arethetypeswrong", [bin("attw"), tarball, "--format", "table-flipped"]],
    ["publint", [bin("publint"), "run", tarball, "--strict"]],
  ];
  for (const [label, args] of checks) {
    const run = spawnSync(process.execPath, args, {
      encoding: "utf8",
      env: { ...process.env, FORCE_COLOR: "0" },
    });
    process.stdout.write(`${run.stdout}${run.stderr}`);
    if (run.status !== 0) {
      console.error(`✗ ${label} found problems in the packed client`);
      failed = true;
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
