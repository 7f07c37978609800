// @ts-check
// The OpenAPI documents as the running Worker serves them, the client's committed snapshot of the
// public one, the TypeScript types generated from it, and `redocly lint` over both documents.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT } from "./local-server.mjs";

export const CLIENT_DIR = path.join(ROOT, "packages/client");
export const SNAPSHOT = path.join(CLIENT_DIR, "openapi.json");
export const GENERATED_TYPES = path.join(CLIENT_DIR, "src/schema.ts");
/** The admin document's types, for the generated-client test (e2e/typed-client/calls.ts). */
export const GENERATED_ADMIN_TYPES = path.join(ROOT, "e2e/typed-client/admin-schema.ts");
/**
 * @typedef {{ name: string, path: string, required: boolean }} DocumentSpec
 * One document the server serves: its name in reports, its route, and whether a 404 is an error.
 */
/** @typedef {import("openapi-typescript").OpenAPI3} OpenApiDocument */
/**
 * @typedef {{ ruleId: string, severity: "error" | "warn", message: string,
 *   location?: Array<{ pointer?: string }> }} LintProblem
 * One problem as `redocly lint --format json` reports it.
 */
/** @typedef {{ errors: number, warnings: number, ignored: number }} LintTotals */

/** @type {DocumentSpec[]} */
export const DOCUMENTS = [
  { name: "public", path: "/v1/openapi.json", required: true },
  // Added by the admin OpenAPI work; linted when the server has it, reported as skipped otherwise.
  { name: "admin", path: "/admin/v1/openapi.json", required: false },
];

/**
 * How the snapshot is written: stable two-space JSON with a final newline.
 * @param {OpenApiDocument} doc
 */
export const formatDocument = (doc) => `${JSON.stringify(doc, null, 2)}\n`;

/**
 * Fetches a document from `baseUrl`; null when the route answers 404 (and `required` is false).
 * @param {string} baseUrl
 * @param {DocumentSpec} spec
 * @param {{ adminToken?: string }} [options]
 * @returns {Promise<OpenApiDocument | null>}
 */
export async function fetchDocument(baseUrl, { path: route, required }, { adminToken } = {}) {
  // The admin document may sit behind the admin token like the rest of /admin/v1.
  /** @type {Record<string, string>} */
  const headers =
    adminToken && route.startsWith("/admin/") ? { Authorization: `Bearer ${adminToken}` } : {};
  const res = await fetch(baseUrl + route, { headers });
  if (res.status === 404 && !required) return null;
  if (res.status !== 200)
    throw new Error(`GET ${route} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  return /** @type {OpenApiDocument} */ (await res.json());
}

/**
 * TypeScript for `doc`, exactly as `npm run openapi -- update` writes it.
 * @param {OpenApiDocument} doc
 */
export async function generateTypes(doc) {
  const { default: openapiTS, astToString, COMMENT_HEADER } = await import("openapi-typescript");
  const ast = await openapiTS(structuredClone(doc), { alphabetize: false });
  return COMMENT_HEADER + astToString(ast);
}

const require = createRequire(import.meta.url);
const REDOCLY = path.join(path.dirname(require.resolve("@redocly/cli/package.json")), "bin/cli.js");
/** Never phone home: no telemetry, no update check (the lint must work offline). */
const REDOCLY_ENV = {
  ...process.env,
  REDOCLY_TELEMETRY: "off",
  REDOCLY_SUPPRESS_UPDATE_NOTICE: "true",
  NO_UPDATE_NOTIFIER: "1",
  CI: "true",
};

/**
 * `redocly lint` (recommended-strict, from redocly.yaml) over one document. Returns the totals
 * and the problems as redocly reports them in its JSON format.
 * @param {OpenApiDocument} doc
 * @param {string} name
 * @returns {{ totals: LintTotals, problems: LintProblem[], exitCode: number | null }}
 */
export function lintDocument(doc, name) {
  const dir = mkdtempSync(path.join(tmpdir(), "animal-store-lint-"));
  try {
    const file = path.join(dir, `${name}.openapi.json`);
    writeFileSync(file, JSON.stringify(doc));
    const run = spawnSync(
      process.execPath,
      [REDOCLY, "lint", file, "--config", path.join(ROOT, "redocly.yaml"), "--format", "json"],
      { encoding: "utf8", env: REDOCLY_ENV, cwd: dir, timeout: 120_000 },
    );
    /** @type {{ totals: LintTotals, problems?: LintProblem[] }} */
    let report;
    try {
      report = JSON.parse(run.stdout.slice(run.stdout.indexOf("{")));
    } catch {
      throw new Error(
        `redocly lint produced no JSON report (exit ${run.status}):\n${run.stdout}\n${run.stderr}`,
      );
    }
    return { totals: report.totals, problems: report.problems ?? [], exitCode: run.status };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The client's committed snapshot of the public document. */
export const readSnapshot = () =>
  /** @type {OpenApiDocument} */ (JSON.parse(readFileSync(SNAPSHOT, "utf8")));
