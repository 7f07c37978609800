// Bundle-size shim, wired in by `[alias]` in wrangler.toml in place of zod's
// `classic/from-json-schema.js` (~5 KiB gzipped): zod re-exports `z.fromJSONSchema` through the
// `z` namespace, which esbuild cannot tree-shake. The service builds its schemas in code and never
// converts a JSON Schema into one; calling it throws.
export const fromJSONSchema = (): never => {
  throw new Error(
    "z.fromJSONSchema is not in the Worker's bundle (src/lib/zod-from-json-schema.ts)",
  );
};
