// `npm run test:bench`: the bench's own tests (bench/test), in the product's test setup (the same
// Workers pool, bindings and migrations; see ../vitest.config.ts), kept out of `npm test`.
import path from "node:path";
import { configDefaults, defineConfig, type ViteUserConfig } from "vitest/config";
import productConfig from "../vitest.config";

export default defineConfig(async (configEnv) => {
  const product: ViteUserConfig =
    typeof productConfig === "function" ? await productConfig(configEnv) : await productConfig;
  return {
    ...product,
    root: path.join(import.meta.dirname, ".."),
    test: {
      ...product.test,
      include: ["bench/**/*.test.ts"],
      exclude: [...configDefaults.exclude],
    },
  };
});
