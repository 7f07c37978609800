// @ts-check
// Writes the operator console's page among the static assets, where the Worker reads it through
// its ASSETS binding (src/routes/console/routes.ts): src/routes/console/page.tsx, bundled for Node
// by esbuild, renders it with Hono's JSX. Run by the [build] command (scripts/docs-assets.mjs)
// before every `wrangler dev` and deploy, and by vitest.config.ts before the tests.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { importBundledForNode } from "./openapi-templates.mjs";

/**
 * The page's file under the assets directory (public/). The assets serve it at its name without
 * ".html" (their default html_handling), which is the path the Worker reads.
 */
export const CONSOLE_PAGE_FILE = "admin/console-page.html";

/**
 * Renders the console's page of the project at `root` into `<root>/public/admin/console-page.html`,
 * replacing what was there. Returns the file written.
 * @param {string} [root]
 */
export async function writeConsolePage(
  root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../.."),
) {
  /** @type {{ consolePageAsset: () => { path: string, text: string } }} */
  const page = await importBundledForNode(root, "src/routes/console/page.tsx");
  const { path: urlPath, text } = page.consolePageAsset();
  // The Worker reads the page by its URL path: it must be the file named here.
  if (`${urlPath}.html` !== `/${CONSOLE_PAGE_FILE}`)
    throw new Error(`the console's page ${urlPath} is not /${CONSOLE_PAGE_FILE} without ".html"`);
  const file = path.join(root, "public", CONSOLE_PAGE_FILE);
  writeFileSync(file, text);
  return path.relative(root, file);
}
