import { defineConfig } from "tsup";

// ESM JavaScript plus .d.ts, for Node ≥ 20, browsers, Deno, Bun and Workers alike.
export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  target: "es2022",
  platform: "neutral",
  dts: true,
  clean: true,
  sourcemap: true,
  external: ["openapi-fetch"],
});
