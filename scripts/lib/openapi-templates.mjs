// @ts-check
// Writes the OpenAPI documents' templates (src/routes/openapi-served.ts) among the static assets:
// src/openapi-templates.ts, bundled for Node by esbuild, generates them from the zod schemas.
// Run by the [build] command (scripts/docs-assets.mjs) before every `wrangler dev` and deploy,
// and by vitest.config.ts before the tests (nothing builds under vitest).
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

/** Where the templates go, under the assets directory (public/): the Worker reads them there. */
export const OPENAPI_TEMPLATES_DIR = "v1/openapi-templates";

/**
 * The Worker's own modules import `cloudflare:workers` (the Durable Object base class); the
 * generator never constructs an object, so Node gets an empty stand-in.
 * @type {import("esbuild").Plugin}
 */
const workersRuntime = {
  name: "cloudflare-runtime",
  setup(b) {
    b.onResolve({ filter: /^cloudflare:/ }, (args) => ({ path: args.path, namespace: "cf" }));
    b.onLoad({ filter: /.*/, namespace: "cf" }, () => ({
      contents:
        "export class DurableObject {}\nexport class WorkerEntrypoint {}\nexport const env = {};",
      loader: "js",
    }));
  },
};

/**
 * Bundles `entry` (a module of the project at `root`, TypeScript or TSX) for Node with esbuild and
 * imports it: how the build runs the Worker's own code (its schemas, its pages) to write assets.
 * @param {string} root
 * @param {string} entry the module's path from `root`
 * @returns {Promise<any>} the module's exports
 */
export async function importBundledForNode(root, entry) {
  const bundle = await build({
    entryPoints: [path.join(root, entry)],
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    logLevel: "error",
    absWorkingDir: root,
    tsconfig: path.join(root, "tsconfig.json"),
    plugins: [workersRuntime],
  });
  const code = bundle.outputFiles[0]?.text ?? "";
  return import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
}

/**
 * Generates the templates of the project at `root` and writes them to
 * `<root>/public/v1/openapi-templates/`, replacing what was there. Returns the files written.
 * @param {string} [root]
 */
export async function writeOpenApiTemplates(
  root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../.."),
) {
  /** @type {{ openApiTemplates: () => { path: string, text: string }[] }} */
  const generator = await importBundledForNode(root, "src/openapi-templates.ts");
  const dir = path.join(root, "public", OPENAPI_TEMPLATES_DIR);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const written = [];
  for (const { path: urlPath, text } of generator.openApiTemplates()) {
    const file = path.join(root, "public", urlPath);
    // The Worker reads each template by its URL path: it must be in the directory named here.
    if (path.dirname(file) !== dir)
      throw new Error(`OpenAPI template ${urlPath} is outside /${OPENAPI_TEMPLATES_DIR}/`);
    writeFileSync(file, text);
    written.push(path.relative(root, file));
  }
  return written;
}
