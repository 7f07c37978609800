// @ts-check
// The Worker's bundle size budget, and how the bundle is measured (scripts/build-check.mjs
// enforces it; the benchmark report shows it).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";

/**
 * The most the deployed Worker's bundle may weigh, gzipped, in KiB: `npm run build:check` fails
 * above it. 120: the bundle is about 110.4 KiB (348 KiB raw), plus room for new code before the
 * budget is looked at again. Not in it, since the Worker never runs them: the OpenAPI documents'
 * generator (zod-to-openapi, the document code and its reference additions, the webhook events'
 * payload schemas: about 15 KiB gzipped; the documents are generated at build time,
 * src/routes/openapi-served.ts), zod's conversion to JSON Schema (about 6.5 KiB;
 * src/lib/zod-json-schema-processors.ts) and the operator console's page with Hono's JSX
 * renderer (about 9.5 KiB; the page is rendered at build time, src/routes/console/routes.ts). What
 * is in it: zod (about a third of the raw bundle; its validation, which every request with a body
 * or a query uses), Hono, and the webhooks (the endpoints' and deliveries' admin routes, signing,
 * URL rules, the queue and dead-letter consumers, the D1 event outbox, the sealing of signing
 * secrets, about 15 KiB gzipped), none of which runs on an admission; the bundle's size costs
 * only an isolate's first load.
 */
export const BUDGET_KIB = 120;

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
