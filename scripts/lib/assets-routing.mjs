// @ts-check
// Checks the static-assets configuration of each environment: bindings are not inherited, so each
// [env.*] block repeats [assets]; a file in the assets directory that a run_worker_first rule
// sends to the Worker (which does not serve files) would never be reachable; and the files only the
// Worker reads through its ASSETS binding (the OpenAPI templates) must be behind such a rule.
import { readdirSync } from "node:fs";
import path from "node:path";

/** Whether `urlPath` matches a run_worker_first pattern (`/a/b` exactly, or `/a/*` as a prefix). */
function matches(pattern, urlPath) {
  return pattern.endsWith("/*") ? urlPath.startsWith(pattern.slice(0, -1)) : urlPath === pattern;
}

/** Every file's URL path under `dir` (the metafiles wrangler never uploads aside). */
function assetPaths(dir, prefix = "") {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (!prefix && ["_headers", "_redirects", ".assetsignore"].includes(entry.name)) return [];
    const urlPath = `${prefix}/${entry.name}`;
    return entry.isDirectory() ? assetPaths(path.join(dir, entry.name), urlPath) : [urlPath];
  });
}

/**
 * The problems with `assets` (an environment's resolved [assets]) against `topLevel` (the top
 * level's): a difference, an asset a run_worker_first rule hides behind the Worker, or one of the
 * files only the Worker reads (through its binding, under `workerOnly`) that anyone could fetch.
 * @param {{ directory?: string, binding?: string, run_worker_first?: boolean | string[] } | undefined} assets
 * @param {{ directory?: string, binding?: string, run_worker_first?: boolean | string[] } | undefined} topLevel
 * @param {string} root the directory of wrangler.toml
 * @param {string[]} [workerOnly] URL path prefixes of the files only the Worker reads
 * @returns {string[]}
 */
export function assetsRoutingProblems(assets, topLevel, root, workerOnly = []) {
  if (!assets?.directory) return ["no [assets] directory"];
  const problems = [];
  if (JSON.stringify(assets) !== JSON.stringify(topLevel))
    problems.push(`[assets] differs from the top level's: ${JSON.stringify(assets)}`);
  const rules = Array.isArray(assets.run_worker_first) ? assets.run_worker_first : [];
  const toWorker = rules.filter((rule) => !rule.startsWith("!"));
  const toAssets = rules.filter((rule) => rule.startsWith("!")).map((rule) => rule.slice(1));
  for (const urlPath of assetPaths(path.resolve(root, assets.directory))) {
    const behindWorker =
      assets.run_worker_first === true ||
      (toWorker.some((rule) => matches(rule, urlPath)) &&
        !toAssets.some((rule) => matches(rule, urlPath)));
    if (workerOnly.some((prefix) => urlPath.startsWith(prefix))) {
      if (!assets.binding) problems.push(`${urlPath} is the Worker's, but [assets] has no binding`);
      else if (!behindWorker)
        problems.push(`${urlPath} is the Worker's only, but no run_worker_first rule covers it`);
    } else if (assets.run_worker_first === true)
      problems.push(`${urlPath}: run_worker_first is true`);
    else if (behindWorker)
      problems.push(`${urlPath} is a static asset, but run_worker_first sends it to the Worker`);
  }
  return problems;
}
