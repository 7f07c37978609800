#!/usr/bin/env node
// @ts-check
// Builds staging and production offline (`wrangler deploy --dry-run`), which validates the
// configuration and bundles the Worker exactly as a deploy would (minify comes from wrangler.toml),
// checks that no measurement code is in the bundle, and reports the gzipped size of each bundle.
// Exits non-zero if a dry-run deploy fails or a bundle contains bench code.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { benchCodeIn } from "./lib/bench-code.mjs";
import { BUDGET_KIB } from "./lib/bundle-budget.mjs";

let failed = false;
for (const env of ["staging", "production"]) {
  const outdir = mkdtempSync(join(tmpdir(), `animal-store-${env}-`));
  const metafile = join(outdir, "meta.json");
  const run = spawnSync(
    "wrangler",
    ["deploy", "--dry-run", "--env", env, "--outdir", outdir, "--metafile", metafile],
    { encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
  );
  if (run.status !== 0) {
    console.error(run.stdout, run.stderr);
    console.error(`✗ ${env}: wrangler deploy --dry-run failed`);
    failed = true;
    rmSync(outdir, { recursive: true, force: true });
    continue;
  }
  const bundle = readdirSync(outdir).filter((f) => f.endsWith(".js"));
  const code = bundle.map((f) => readFileSync(join(outdir, f), "utf8")).join("\n");
  const found = benchCodeIn(JSON.parse(readFileSync(metafile, "utf8")), code);
  if (found.length) {
    console.error(`✗ ${env}: the bundle contains bench code:\n  ${found.join("\n  ")}`);
    failed = true;
  }
  const gzipped =
    bundle.reduce((sum, f) => sum + gzipSync(readFileSync(join(outdir, f))).length, 0) / 1024;
  // The size budget is reported, not enforced here.
  const ok = gzipped <= BUDGET_KIB;
  console.log(
    `${found.length ? "✗" : "✓"} ${env}: dry-run deploy OK; ` +
      `${found.length ? "BENCH CODE IN THE BUNDLE" : "no bench code"}; bundle ${gzipped.toFixed(1)} KiB gzipped ` +
      `(${ok ? "within" : "OVER"} the ${BUDGET_KIB} KiB budget)`,
  );
  rmSync(outdir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
