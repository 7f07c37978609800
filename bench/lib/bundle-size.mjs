// @ts-check
// The size of the Worker's bundle as a deploy would build it (`wrangler deploy --dry-run`), and
// which packages take the space.
import { readFileSync } from "node:fs";
import path from "node:path";
import { measureBundle } from "../../scripts/lib/bundle-budget.mjs";
import { makeTempDir, runWrangler } from "../../scripts/lib/local-server.mjs";

/**
 * Raw and gzipped KiB of the dry-run bundle of the project at `root`, and its six largest
 * packages (bytes in the minified output, before gzip).
 * @param {string} root
 */
export async function bundleSize(root) {
  const dir = makeTempDir("animal-store-bundle-");
  const outdir = path.join(dir, "dist");
  const output = await runWrangler(
    [
      "deploy",
      "--dry-run",
      "--env=",
      "--outdir",
      outdir,
      "--metafile",
      path.join(dir, "meta.json"),
      "--config",
      path.join(root, "wrangler.toml"),
    ],
    { cwd: root },
  );
  const reported = output.match(/Total Upload: ([0-9.]+) KiB \/ gzip: ([0-9.]+) KiB/);
  const { rawKiB, gzipKiB } = measureBundle(outdir);
  const packages = {};
  try {
    const meta = JSON.parse(readFileSync(path.join(dir, "meta.json"), "utf8"));
    for (const out of Object.values(meta.outputs)) {
      for (const [input, { bytesInOutput }] of Object.entries(out.inputs ?? {})) {
        const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
        const name = input.includes("zod/v4/locales/")
          ? "zod locales"
          : m
            ? m[1]
            : input.startsWith("src/")
              ? "src (this project)"
              : "other";
        packages[name] = (packages[name] ?? 0) + bytesInOutput;
      }
    }
  } catch {
    /* the metafile is a nicety */
  }
  const top = Object.entries(packages)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6);
  return {
    rawKiB,
    gzipKiB,
    wranglerKiB: reported ? Number(reported[2]) : null,
    top,
  };
}
