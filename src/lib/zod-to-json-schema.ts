// Bundle-size shim, wired in by `[alias]` in wrangler.toml in place of zod's
// `core/to-json-schema.js` and `core/json-schema-generator.js`, zod's JSON Schema generator (see
// zod-json-schema-processors.ts, the other half): the Worker never converts a schema to JSON
// Schema. `schema.toJSONSchema()` and the JSON Schema methods of `schema["~standard"]` throw when
// called; reading `~standard` (the Standard Schema interface, its `validate` included) still works.
function notInThisBundle(): never {
  throw new Error(
    "zod's JSON Schema conversion is not in the Worker's bundle (src/lib/zod-to-json-schema.ts)",
  );
}

export const initializeContext = notInThisBundle;
export const handleUnrepresentable = notInThisBundle;
export const processSchema = notInThisBundle;
export { processSchema as process };
export const extractDefs = notInThisBundle;
export const finalize = notInThisBundle;
// zod makes these methods when `~standard` is read or `toJSONSchema()` called; the method throws.
export const createToJSONSchemaMethod = () => notInThisBundle;
export const createStandardJSONSchemaMethod = () => notInThisBundle;

export class JSONSchemaGenerator {
  constructor() {
    notInThisBundle();
  }
}
