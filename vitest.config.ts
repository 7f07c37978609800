import os from "node:os";
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";
import { writeConsolePage } from "./scripts/lib/console-page.mjs";
import { writeOpenApiTemplates } from "./scripts/lib/openapi-templates.mjs";

/** A JSON line of the service's logger other than an unhandled exception. */
function isHandledServiceLog(line: string): boolean {
  const msg = line.match(/^\{"level":"(?:debug|info|warn|error)","msg":"([^"]*)"/)?.[1];
  return msg !== undefined && msg !== "unhandled exception";
}

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  // The Worker serves its OpenAPI documents from templates, and the console's page, from among
  // its static assets, which the build writes (wrangler's [build] command); nothing builds under
  // vitest, so they are written here, from this checkout's source, before any test runs.
  await writeOpenApiTemplates();
  await writeConsolePage();
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.toml" },
        // workerd's verbose log repeats, with a stack trace, each exception a test provokes and the
        // code handles (a Durable Object that refuses to open, a failing call), and warns of every
        // non-ASCII header value test/adversarial.http.test.ts sends on purpose. Each is asserted
        // by its test (the adversarial test checks that no answer carries a non-ASCII header);
        // an unhandled error still fails the run, and console output stays as onConsoleLog says.
        verbose: false,
        miniflare: {
          // No test reaches the network. A test that delivers webhooks replaces the consumer's
          // fetch with a receiver of its own; a delivery made elsewhere (the queue consumer of the
          // Worker, after a walk sent a test event) gets 503 here, an answer the consumer retries,
          // rather than a DNS failure that workerd logs as an internal error.
          outboundService: () => new Response("no network in tests", { status: 503 }),
          // Test-only bindings: the migrations for the setup file, and a known admin token.
          bindings: {
            TEST_MIGRATIONS: migrations,
            ADMIN_TOKEN: "test-admin-token",
            // Named tokens beside ADMIN_TOKEN ("admin"): the audit trail tells them apart.
            ADMIN_TOKENS: "alice:test-alice-admin-token,ci:test-ci-admin-token-0",
            // A read-only admin token: reads only, every write answers 403.
            ADMIN_READ_TOKENS: "viewer:test-viewer-read-token",
            CURSOR_SECRET: "test-cursor-secret",
            KEY_TAG_SECRET: "test-key-tag-secret-0123456789abcdef",
            // Seals webhook signing secrets in D1: the base64 of 32 bytes.
            WEBHOOK_ENCRYPTION_KEY: "dGVzdC13ZWJob29rLWVuY3J5cHRpb24ta2V5LTAwMDA=",
            // The quota model's runs (test/quota.model.test.ts): CI's fixed budget unless
            // npm run test:model (scripts/test-model.mjs) asks for more or replays one.
            MODEL_RUNS: process.env.MODEL_RUNS ?? "",
            MODEL_SEED: process.env.MODEL_SEED ?? "",
            MODEL_PATH: process.env.MODEL_PATH ?? "",
            MODEL_REPLAY: process.env.MODEL_REPLAY ?? "",
            // The tests' requests go to https://api.example.com (test/helpers.ts BASE).
            PUBLIC_ORIGIN: "https://api.example.com",
          },
        },
      }),
    ],
    test: {
      // e2e/ runs under node --test against wrangler dev (npm run test:e2e); the bench's own
      // tests run apart from the product's (npm run test:bench, bench/vitest.config.ts).
      // .stryker-tmp: npm run mutate's sandbox copies (their tests run inside the sandbox);
      // .rehearsal: the previous releases npm run rehearse:rollback checks out.
      exclude: [
        ...configDefaults.exclude,
        "e2e/**",
        "bench/**",
        ".stryker-tmp/**",
        ".rehearsal/**",
      ],
      setupFiles: ["./test/setup/apply-migrations.ts"],
      // A fresh worker per test file, chosen (vitest's default, said here so its hint to turn it
      // off is not printed): files share no module state, such as the isolate's caches and the
      // configuration problems already logged, whatever order they run in.
      isolate: true,
      // Test files run in workerd, one per worker at a time; vitest's default leaves one core to
      // its own process, which mostly waits for the workers here: use them all.
      maxWorkers: os.availableParallelism(),
      // Some tests send hundreds of requests; on a loaded 2-core machine 5 s is too tight.
      testTimeout: 30_000,
      // The service's own log lines (src/lib/log.ts) are expected in tests: one access-log line per
      // request, and a warning or error for each fault a test provokes on purpose (D1 failing, a
      // limiter unreachable, a bad setting), which the service handles. They are kept out of the
      // output so that what is left stands out: an unhandled exception (a bug: the service
      // answered 500), or anything else a test or the runtime prints. TEST_LOGS=all shows them.
      onConsoleLog: (log: string) => process.env.TEST_LOGS === "all" || !isHandledServiceLog(log),
    },
  };
});
