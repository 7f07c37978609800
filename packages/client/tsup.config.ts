import { defineConfig } from "tsup";

// ESM (dist/index.js) and CommonJS (dist/index.cjs), each with its own declarations (.d.ts and
// .d.cts), for Node ≥ 20 (import or require), browsers, Deno, Bun and Workers alike.
export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm", "cjs"],
  target: "es2022",
  platform: "neutral",
  dts: true,
  clean: true,
  sourcemap: true,
  external: ["openapi-fetch"],
});
