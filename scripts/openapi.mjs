#!/usr/bin/env node
// @ts-check
// `npm run openapi -- update`: start the API locally, write the served public document to
//   packages/client/openapi.json and the types generated from it to packages/client/src/schema.ts,
//   and the admin document's types to e2e/typed-client/admin-schema.ts.
// `npm run openapi -- lint [--url URL]`: `redocly lint` (recommended-strict) over the public and the
//   admin document of a running server (--url), or of one started for the purpose. Exits 1 on any
//   error or warning. The admin document is skipped, and said so, while its route answers 404.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { cleanupNow, ROOT, startApiOnFreePorts } from "./lib/local-server.mjs";
import {
  DOCUMENTS,
  fetchDocument,
  formatDocument,
  GENERATED_ADMIN_TYPES,
  GENERATED_TYPES,
  generateTypes,
  lintDocument,
  SNAPSHOT,
} from "./lib/openapi.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { url: { type: "string" }, token: { type: "string" } },
});
const [command] = positionals;
if (command !== "update" && command !== "lint") {
  console.error(
    "Usage: npm run openapi -- update | lint [--url http://localhost:8787 [--token ADMIN_TOKEN]]",
  );
  process.exit(2);
}

// A server of its own unless --url names one already running.
const server = values.url ? null : await startApiOnFreePorts({ localObservability: false });
const baseUrl = (server?.url ?? values.url ?? "").replace(/\/$/, "");
const adminToken = values.token ?? process.env.ADMIN_TOKEN ?? server?.adminToken;
let failed = false;
try {
  if (command === "update") {
    const doc = await fetchDocument(baseUrl, DOCUMENTS[0]);
    const adminDoc = await fetchDocument(baseUrl, DOCUMENTS[1], { adminToken });
    // The update writes both or neither: a server without the admin document cannot be the source.
    if (!doc || !adminDoc) throw new Error(`${baseUrl} serves no admin document (404)`);
    writeFileSync(SNAPSHOT, formatDocument(doc));
    writeFileSync(GENERATED_TYPES, await generateTypes(doc));
    writeFileSync(GENERATED_ADMIN_TYPES, await generateTypes(adminDoc));
    console.log(
      `wrote ${[SNAPSHOT, GENERATED_TYPES, GENERATED_ADMIN_TYPES].map((f) => path.relative(ROOT, f)).join(", ")}`,
    );
  } else {
    for (const spec of DOCUMENTS) {
      const doc = await fetchDocument(baseUrl, spec, { adminToken });
      if (!doc) {
        console.log(
          `${spec.name} (${spec.path}): skipped, the server answers 404 (no such document yet)`,
        );
        continue;
      }
      const { totals, problems } = lintDocument(doc, spec.name);
      console.log(
        `${spec.name} (${spec.path}): ${totals.errors} errors, ${totals.warnings} warnings (redocly recommended-strict)`,
      );
      for (const p of problems)
        console.log(
          `  ${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer ?? "?"}`,
        );
      if (totals.errors || totals.warnings) failed = true;
    }
  }
} finally {
  await server?.stop();
  cleanupNow();
}
process.exit(failed ? 1 : 0);
