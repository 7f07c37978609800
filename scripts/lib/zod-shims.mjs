// @ts-check
// wrangler.toml's `[alias]` swaps modules zod imports by relative specifier ("./compile.js") for
// small shims in src/lib/. An alias applies to every import with that specifier, so a module of
// another package importing a file of the same name would silently get a zod shim instead: this
// finds such imports in a bundle's esbuild metafile.
import path from "node:path";

/**
 * The imports of an alias target by anything other than zod's own modules, as "importer imports
 * specifier". Empty when only zod imports them.
 * @param {{ inputs?: Record<string, { imports?: { path: string, original?: string }[] }> }} metafile
 * @param {Record<string, string> | undefined} aliases wrangler's `alias`, specifier → shim path
 * @returns {string[]}
 */
export function shimImportsOutsideZod(metafile, aliases) {
  const shims = new Set(Object.values(aliases ?? {}).map((target) => path.normalize(target)));
  const found = [];
  for (const [input, { imports = [] }] of Object.entries(metafile.inputs ?? {})) {
    if (/(^|\/)node_modules\/zod\//.test(input)) continue;
    for (const imported of imports) {
      if (shims.has(path.normalize(imported.path))) {
        found.push(`${input} imports ${imported.original ?? imported.path}`);
      }
    }
  }
  return found;
}
