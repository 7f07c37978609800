// Bundle-size shim, wired in by `[alias]` in wrangler.toml in place of
// `@asteasolutions/zod-to-openapi`, which only `@hono/zod-openapi` imports (~8 KiB gzipped with
// its generators). The Worker serves its OpenAPI documents as generated at build time
// (routes/openapi-served.ts), so it never generates one: `.openapi(…)` on a schema only adds
// metadata for the generator, and keeps the schema as it is here; route registrations are
// dropped. Validation is zod's own and unchanged. The tests and the build's generator
// (src/openapi-templates.ts) use the real package.

type ZodNamespace = { ZodType: { prototype: object } };

export function extendZodWithOpenApi(zod: ZodNamespace): void {
  const prototype = zod.ZodType.prototype as { openapi?: () => unknown };
  prototype.openapi ??= function (this: unknown) {
    return this;
  };
}

function notInThisBundle(name: string): never {
  throw new Error(
    `zod-to-openapi's ${name} is not in the Worker's bundle (src/lib/zod-to-openapi.ts)`,
  );
}

/** OpenAPIHono's registry of routes and components, which only a generator reads. */
export class OpenAPIRegistry {
  readonly definitions: never[] = [];
  register<T>(_refId: string, schema: T): T {
    return schema;
  }
  registerParameter<T>(_refId: string, schema: T): T {
    return schema;
  }
  registerPath(): void {}
  registerWebhook(): void {}
  registerComponent(type: string, name: string) {
    return { name, ref: { $ref: `#/components/${type}/${name}` } };
  }
}

export class OpenApiGeneratorV3 {
  constructor() {
    notInThisBundle("OpenApiGeneratorV3");
  }
}
export class OpenApiGeneratorV31 {
  constructor() {
    notInThisBundle("OpenApiGeneratorV31");
  }
}
export const getOpenApiMetadata = (): never => notInThisBundle("getOpenApiMetadata");
