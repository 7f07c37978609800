#!/usr/bin/env node
// @ts-check
// Builds staging and production offline (`wrangler deploy --dry-run`), which validates the
// configuration and bundles the Worker exactly as a deploy would (minify comes from wrangler.toml),
// checks each environment's static assets configuration (lib/assets-routing.mjs),
// checks that no measurement code is in the bundle, that only the package each shim of `[alias]`
// is for imports it (lib/zod-shims.mjs), and checks the gzipped size of each bundle against the
// budget.
// Exits non-zero if a dry-run deploy fails, an environment's assets configuration is wrong, a
// bundle contains bench code, a shim replaces another package's module or a bundle is over the
// budget.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { unstable_readConfig } from "wrangler";
import { assetsRoutingProblems } from "./lib/assets-routing.mjs";
import { benchCodeIn } from "./lib/bench-code.mjs";
import { BUDGET_KIB, measureBundle } from "./lib/bundle-budget.mjs";
import { CONSOLE_PAGE_FILE } from "./lib/console-page.mjs";
import { OPENAPI_TEMPLATES_DIR } from "./lib/openapi-templates.mjs";
import { misplacedShimImports } from "./lib/zod-shims.mjs";

const ROOT = join(import.meta.dirname, "..");
/** @param {string | undefined} env */
const configOf = (env) =>
  unstable_readConfig({ config: join(ROOT, "wrangler.toml"), env }, { hideWarnings: true });
/** @param {string | undefined} env */
const assetsOf = (env) => configOf(env).assets;
/** The files among the assets that only the Worker reads (through its ASSETS binding). */
const WORKER_ONLY = [`/${OPENAPI_TEMPLATES_DIR}/`, `/${CONSOLE_PAGE_FILE}`];

let failed = false;
const localProblems = assetsRoutingProblems(
  assetsOf(undefined),
  assetsOf(undefined),
  ROOT,
  WORKER_ONLY,
);
if (localProblems.length) {
  console.error(`✗ top level (local): static assets:\n  ${localProblems.join("\n  ")}`);
  failed = true;
}
for (const env of ["staging", "production"]) {
  const assetProblems = assetsRoutingProblems(
    assetsOf(env),
    assetsOf(undefined),
    ROOT,
    WORKER_ONLY,
  );
  if (assetProblems.length) {
    console.error(`✗ ${env}: static assets:\n  ${assetProblems.join("\n  ")}`);
    failed = true;
  }
  const dir = mkdtempSync(join(tmpdir(), `animal-store-${env}-`));
  // The metafile sits beside the output, not in it: only the Worker's modules are measured.
  const outdir = join(dir, "dist");
  mkdirSync(outdir);
  const metafile = join(dir, "meta.json");
  const run = spawnSync(
    "wrangler",
    ["deploy", "--dry-run", "--env", env, "--outdir", outdir, "--metafile", metafile],
    { encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
  );
  if (run.status !== 0) {
    console.error(run.stdout, run.stderr);
    console.error(`✗ ${env}: wrangler deploy --dry-run failed`);
    failed = true;
    rmSync(dir, { recursive: true, force: true });
    continue;
  }
  const bundle = readdirSync(outdir).filter((f) => f.endsWith(".js"));
  const code = bundle.map((f) => readFileSync(join(outdir, f), "utf8")).join("\n");
  const meta = JSON.parse(readFileSync(metafile, "utf8"));
  const found = benchCodeIn(meta, code);
  if (found.length) {
    console.error(`✗ ${env}: the bundle contains bench code:\n  ${found.join("\n  ")}`);
    failed = true;
  }
  const misplacedShims = misplacedShimImports(meta, configOf(env).alias);
  if (misplacedShims.length) {
    console.error(
      `✗ ${env}: a shim of [alias] replaces another package's module:\n  ${misplacedShims.join("\n  ")}`,
    );
    failed = true;
  }
  const gzipped = measureBundle(outdir).gzipKiB;
  const withinBudget = gzipped <= BUDGET_KIB;
  if (!withinBudget) failed = true;
  console.log(
    `${found.length || misplacedShims.length || !withinBudget || assetProblems.length ? "✗" : "✓"} ${env}: dry-run deploy OK; ` +
      `${found.length ? "BENCH CODE IN THE BUNDLE" : "no bench code"}; bundle ${gzipped.toFixed(1)} KiB gzipped ` +
      `(${withinBudget ? "within" : "OVER"} the ${BUDGET_KIB} KiB budget)`,
  );
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
