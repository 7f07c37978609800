// @ts-check
// The Worker's bundle size budget, and how the bundle is measured (scripts/build-check.mjs
// enforces it; the benchmark report shows it).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";

/**
 * The most the deployed Worker's bundle may weigh, gzipped, in KiB: `npm run build:check` fails
 * above it. 138 since the Worker also delivers webhooks: the endpoints' and deliveries' admin
 * routes, the event payload schemas of the operator document, signing, URL rules (with the table
 * of refused address blocks), the queue and dead-letter consumers, the D1 event outbox, one retry
 * chain per delivery and the sealing of signing secrets weigh about 15 KiB gzipped (a third of it
 * the documents' descriptions); and sparse keys' standing permits about 1 KiB. None of the
 * webhook code runs on an admission; the bundle's size costs only an isolate's first load. zod is
 * a third of the raw bundle.
 */
export const BUDGET_KIB = 138;

/**
 * Raw and gzipped KiB of the Worker's modules in a `wrangler deploy --dry-run --outdir` directory:
 * every file wrangler writes there except its source maps and its README, so a module attached
 * beside index.js (text or data by a wrangler rule) counts too. Static assets are not in it.
 * @param {string} outdir
 */
export function measureBundle(outdir) {
  let raw = 0;
  let gzip = 0;
  for (const file of readdirSync(outdir)) {
    if (file.endsWith(".map") || file === "README.md") continue;
    const bytes = readFileSync(path.join(outdir, file));
    raw += bytes.length;
    gzip += gzipSync(bytes).length;
  }
  return { rawKiB: raw / 1024, gzipKiB: gzip / 1024 };
}
