#!/usr/bin/env node
// @ts-check
// The static assets the build makes; wrangler runs this as the [build] command before
// `wrangler dev` and `wrangler deploy`:
// - the pinned Scalar API reference bundle (the @scalar/api-reference devDependency, exact
//   version), copied into public/docs/, where Workers Static Assets serves it at /docs/scalar.js;
// - the OpenAPI documents' templates, generated from the zod schemas into
//   public/v1/openapi-templates/, which the Worker reads through its ASSETS binding
//   (lib/openapi-templates.mjs);
// - the operator console's page, rendered from src/routes/console/page.tsx into
//   public/admin/console-page.html, which the Worker reads through its ASSETS binding
//   (lib/console-page.mjs).
import { copyFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { writeConsolePage } from "./lib/console-page.mjs";
import { writeOpenApiTemplates } from "./lib/openapi-templates.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// The package's exports map hides package.json and dist/browser: take them from the install.
const pkgDir = path.join(root, "node_modules/@scalar/api-reference");
const { version } = /** @type {{ version: string }} */ (
  JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"))
);
copyFileSync(
  path.join(pkgDir, "dist/browser/standalone.js"),
  path.join(root, "public/docs/scalar.js"),
);
console.log(`public/docs/scalar.js: @scalar/api-reference ${version}`);
console.log(`OpenAPI templates: ${(await writeOpenApiTemplates(root)).join(", ")}`);
console.log(`Console page: ${await writeConsolePage(root)}`);
