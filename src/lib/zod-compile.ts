// Bundle-size shim, wired in by `[alias]` in wrangler.toml in place of zod's `core/compile.js`
// (~7 KiB gzipped): zod re-exports its ahead-of-time compiler through the `z` namespace, which
// esbuild cannot tree-shake. The service never compiles a schema, and the compiler generates code
// with `new Function`, which Workers do not allow. These keep the names zod re-exports; calling
// them throws.
export const INVALID = Symbol.for("zod.compile.invalid");

function notInThisBundle(name: string): never {
  throw new Error(`z.${name} is not in the Worker's bundle (src/lib/zod-compile.ts)`);
}

export class ZodCompileAsyncError extends Error {}
export class ZodCompileUnsupportedError extends Error {}
export const compile = (): never => notInThisBundle("compile");
export const withParser = (): never => notInThisBundle("withParser");
