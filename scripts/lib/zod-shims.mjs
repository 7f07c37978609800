// @ts-check
// wrangler.toml's `[alias]` swaps modules for small shims in src/lib/: modules zod imports by
// relative specifier ("./compile.js"), and zod-to-openapi, which @hono/zod-openapi imports. An
// alias applies to every import with that specifier, so a module of another package importing a
// file of the same name (or the Worker's own code importing zod-to-openapi) would silently get a
// shim instead: this finds such imports in a bundle's esbuild metafile.
import path from "node:path";

/** The package whose modules may import an alias's shim: zod, but where named here. */
const IMPORTER_OF = { "@asteasolutions/zod-to-openapi": "@hono/zod-openapi" };

/**
 * The imports of an alias target by anything other than the package its alias is for, as
 * "importer imports specifier". Empty when only that package imports them.
 * @param {{ inputs?: Record<string, { imports?: { path: string, original?: string }[] }> }} metafile
 * @param {Record<string, string> | undefined} aliases wrangler's `alias`, specifier → shim path
 * @returns {string[]}
 */
export function misplacedShimImports(metafile, aliases) {
  /** @type {Map<string, string>} shim path → the package allowed to import it */
  const shims = new Map(
    Object.entries(aliases ?? {}).map(([specifier, target]) => [
      path.normalize(target),
      /** @type {Record<string, string>} */ (IMPORTER_OF)[specifier] ?? "zod",
    ]),
  );
  const found = [];
  for (const [input, { imports = [] }] of Object.entries(metafile.inputs ?? {})) {
    for (const imported of imports) {
      const allowed = shims.get(path.normalize(imported.path));
      if (allowed === undefined || input.includes(`node_modules/${allowed}/`)) continue;
      found.push(`${input} imports ${imported.original ?? imported.path}`);
    }
  }
  return found;
}
