import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          // Test-only bindings: the migrations for the setup file, and a known admin token.
          bindings: {
            TEST_MIGRATIONS: migrations,
            ADMIN_TOKEN: "test-admin-token",
            // Named tokens beside ADMIN_TOKEN ("admin"): the audit trail tells them apart.
            ADMIN_TOKENS: "alice:test-alice-admin-token,ci:test-ci-admin-token-0",
            // A read-only admin token: reads only, every write answers 403.
            ADMIN_READ_TOKENS: "viewer:test-viewer-read-token",
            CURSOR_SECRET: "test-cursor-secret",
            // The tests' requests go to https://api.example.com (test/helpers.ts BASE).
            PUBLIC_ORIGIN: "https://api.example.com",
          },
        },
      }),
    ],
    test: {
      // e2e/ runs under node --test against wrangler dev (npm run test:e2e); the bench's own
      // tests run apart from the product's (npm run test:bench, bench/vitest.config.ts).
      exclude: [...configDefaults.exclude, "e2e/**", "bench/**"],
      setupFiles: ["./test/setup/apply-migrations.ts"],
      // Some tests send hundreds of requests; on a loaded 2-core machine 5 s is too tight.
      testTimeout: 30_000,
      // The access log prints one JSON line per request; keep test output readable.
      onConsoleLog: (log: string) => !log.includes('"msg":"request"'),
    },
  };
});
