// Bundle-size shim, wired in by `[alias]` in wrangler.toml in place of zod's
// `core/json-schema-processors.js`: with zod's JSON Schema generator (zod-to-json-schema.ts) about
// 6 KiB gzipped. zod gives every schema a JSON Schema processor and exports `z.toJSONSchema`
// through the `z` namespace, which esbuild cannot tree-shake. The Worker never converts a schema
// to JSON Schema (its OpenAPI documents are generated at build time: routes/openapi-served.ts), so
// everything here throws when called. That includes `aggregateChecks`, behind the bounds a schema
// derives from its checks (`minLength`, `maxLength`, `minValue`, `maxValue`, `minDate`, `maxDate`,
// `isInt`, `isFinite`, `format`): zod reads them only to convert, and the Worker's code never
// does (test/zod-shims.test.ts); validation never uses them.
function notInThisBundle(): never {
  throw new Error(
    "zod's JSON Schema conversion is not in the Worker's bundle (src/lib/zod-json-schema-processors.ts)",
  );
}

export const toJSONSchema = notInThisBundle;
export const aggregateChecks = notInThisBundle;
export const allProcessors = {};
export const stringProcessor = notInThisBundle;
export const numberProcessor = notInThisBundle;
export const booleanProcessor = notInThisBundle;
export const bigintProcessor = notInThisBundle;
export const symbolProcessor = notInThisBundle;
export const nullProcessor = notInThisBundle;
export const undefinedProcessor = notInThisBundle;
export const voidProcessor = notInThisBundle;
export const neverProcessor = notInThisBundle;
export const anyProcessor = notInThisBundle;
export const unknownProcessor = notInThisBundle;
export const dateProcessor = notInThisBundle;
export const enumProcessor = notInThisBundle;
export const literalProcessor = notInThisBundle;
export const nanProcessor = notInThisBundle;
export const templateLiteralProcessor = notInThisBundle;
export const fileProcessor = notInThisBundle;
export const successProcessor = notInThisBundle;
export const customProcessor = notInThisBundle;
export const functionProcessor = notInThisBundle;
export const transformProcessor = notInThisBundle;
export const mapProcessor = notInThisBundle;
export const setProcessor = notInThisBundle;
export const arrayProcessor = notInThisBundle;
export const objectProcessor = notInThisBundle;
export const unionProcessor = notInThisBundle;
export const intersectionProcessor = notInThisBundle;
export const tupleProcessor = notInThisBundle;
export const recordProcessor = notInThisBundle;
export const nullableProcessor = notInThisBundle;
export const nonoptionalProcessor = notInThisBundle;
export const defaultProcessor = notInThisBundle;
export const prefaultProcessor = notInThisBundle;
export const catchProcessor = notInThisBundle;
export const pipeProcessor = notInThisBundle;
export const readonlyProcessor = notInThisBundle;
export const promiseProcessor = notInThisBundle;
export const optionalProcessor = notInThisBundle;
export const lazyProcessor = notInThisBundle;
