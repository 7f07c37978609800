// @ts-check
// The client as a consumer gets it: `npm pack` the package, install the tarball into a fresh
// project, then (a) call a running local API from plain Node 20 and Node 22, with `import` and
// with `require`, (b) type-check consumer files with tsc (moduleResolution NodeNext, no Workers
// types): an ES module and a CommonJS `.cts` file, which is then compiled and run, and (c) see
// what an uncaught error prints.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { cleanupNow, issueKey, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";
import { projectNode22, ROOT, systemNode } from "./helpers.mjs";

const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");

/** What a command execFileSync ran printed, from the error it threw for a non-zero exit. */
const outputOf = (/** @type {unknown} */ error) => {
  const { stdout = "", stderr = "" } = /** @type {{ stdout?: string, stderr?: string }} */ (error);
  return `${stdout}${stderr}`;
};

const CONSUMER_JS = `
import { ApiError, createAnimalStoreClient } from "@animal-store/client";
const store = createAnimalStoreClient({ baseUrl: process.env.API_URL, apiKey: process.env.API_KEY });
const tag = process.versions.node;
const created = await store.createPet({ name: "From Node " + tag, categoryId: 2 }, { idempotencyKey: crypto.randomUUID() });
const names = [];
for await (const pet of store.pets({ limit: 1 })) names.push(pet.name);
const fetched = await store.getPet(created.id);
const missing = await store.getPet(999999999).catch((e) => e);
console.log(JSON.stringify({ node: tag, created, names, fetched, rateLimit: store.rateLimit, missing: missing instanceof ApiError ? { status: missing.status, code: missing.code } : String(missing) }));
`;

// CommonJS, as a project without "type": "module" writes it (run as consumer.cjs).
const CONSUMER_CJS = `
const { ApiError, RateLimitError, createAnimalStoreClient } = require("@animal-store/client");
const store = createAnimalStoreClient({ baseUrl: process.env.API_URL, apiKey: process.env.API_KEY });
(async () => {
  const created = await store.createPet({ name: "From require " + process.versions.node, categoryId: 2 });
  const missing = await store.getPet(999999999).catch((e) => e);
  console.log(JSON.stringify({
    node: process.versions.node,
    created,
    missing: { apiError: missing instanceof ApiError, rateLimit: missing instanceof RateLimitError, status: missing.status, code: missing.code, line: String(missing) },
  }));
})();
`;

// A CommonJS TypeScript consumer: type-checked against the .d.cts types, compiled, then run.
const CONSUMER_CTS = `
import { ApiError, NetworkError, RateLimitError, createAnimalStoreClient, type Pet } from "@animal-store/client";

const store = createAnimalStoreClient({ baseUrl: process.env.API_URL!, apiKey: process.env.API_KEY!, timeoutMs: 5_000 });
async function main(): Promise<void> {
  const pet: Pet = await store.createPet({ name: "From .cts", categoryId: 5 });
  const names: string[] = [];
  for await (const p of store.listAllPets({ limit: 2 })) names.push(p.name);
  let code: string | undefined;
  try {
    await store.getPet(999999999);
  } catch (e) {
    if (e instanceof RateLimitError) throw e;
    if (e instanceof NetworkError) throw e;
    if (e instanceof ApiError) code = e.code;
  }
  console.log(JSON.stringify({ pet: pet.name, found: names.includes(pet.name), code }));
}
main();
`;

// No catch: what an uncaught ApiError prints.
const UNCAUGHT_JS = `
import { createAnimalStoreClient } from "@animal-store/client";
const store = createAnimalStoreClient({ baseUrl: process.env.API_URL, apiKey: process.env.API_KEY });
await store.getPet(999999999);
`;

const CONSUMER_TS = `
import { AnimalStoreError, createAnimalStoreClient, type Pet, type RateLimit } from "@animal-store/client";

const store = createAnimalStoreClient({ baseUrl: "http://localhost:8787", apiKey: "pet_test_x", maxRetries: 2 });
export async function demo(signal: AbortSignal): Promise<string[]> {
  const pet: Pet = await store.createPet({ name: "Rex", categoryId: 1, status: "available" }, { signal });
  await store.createPet({ name: "Rex", categoryId: 1 }, { idempotencyKey: crypto.randomUUID() });
  const page = await store.listPets({ limit: 10, status: "sold" });
  const next: string | null = page.nextCursor;
  // @ts-expect-error limit is a number
  await store.listPets({ limit: "10" });
  // @ts-expect-error status is one of available | pending | sold
  await store.listPets({ status: "lost" });
  const { data } = await store.api.GET("/pets", { params: { query: { limit: 5 } } });
  const rl: RateLimit | undefined = store.rateLimit;
  try {
    await store.getPet(pet.id);
  } catch (e) {
    if (e instanceof AnimalStoreError && e.code === "not_found") return [];
  }
  return [pet.name, next ?? "", String(data?.length), String(rl?.remaining)];
}
`;

/** How a consumer of the package compiles: NodeNext, no Workers or Node types, library types checked. */
const CONSUMER_COMPILER_OPTIONS = {
  target: "ES2022",
  module: "NodeNext",
  moduleResolution: "NodeNext",
  lib: ["ES2022", "DOM"],
  types: [],
  strict: true,
  skipLibCheck: false,
};

describe("the packed @animal-store/client in a fresh project", () => {
  let dir;
  let api;
  let key;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "animal-store-consumer-"));
    // prepack builds the package (tsup), so the tarball holds what `npm run build` makes.
    const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dir], {
      cwd: path.join(ROOT, "packages/client"),
      encoding: "utf8",
    });
    const packed = JSON.parse(out.slice(out.indexOf("[\n"))); // after the build's own output
    const files = packed[0].files.map((f) => f.path).sort();
    assert.deepEqual(files, [
      "README.md",
      "dist/index.cjs",
      "dist/index.cjs.map",
      "dist/index.d.cts",
      "dist/index.d.ts",
      "dist/index.js",
      "dist/index.js.map",
      "openapi.json",
      "package.json",
    ]);
    writeFileSync(
      path.join(dir, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    execFileSync(
      "npm",
      [
        "install",
        "--no-audit",
        "--no-fund",
        "--prefer-offline",
        path.join(dir, packed[0].filename),
      ],
      { cwd: dir, stdio: "pipe" },
    );
    api = await startApiOnFreePorts({ localObservability: false });
    key = (await issueKey(api, { name: "consumer", plan: "pro" })).key;
  });

  after(async () => {
    await api?.stop();
    cleanupNow();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("installs only the client and openapi-fetch: no server code, no Workers types", () => {
    const installed = readdirSync(path.join(dir, "node_modules")).sort();
    assert.deepEqual(
      installed.filter((n) => !n.startsWith(".")),
      ["@animal-store", "openapi-fetch", "openapi-typescript-helpers"],
    );
    for (const types of ["index.d.ts", "index.d.cts"]) {
      const dts = readFileSync(
        path.join(dir, "node_modules/@animal-store/client/dist", types),
        "utf8",
      );
      assert.doesNotMatch(dts, /workers-types|D1Database|DurableObject|SqlStorage|from "hono/);
    }
  });

  for (const [label, bin] of /** @type {Array<[string, () => string]>} */ ([
    ["Node 20", () => systemNode(20)],
    ["Node 22", projectNode22],
  ])) {
    it(`calls the running API from plain ${label}`, () => {
      writeFileSync(path.join(dir, "consumer.mjs"), CONSUMER_JS);
      const startedSeconds = Date.now() / 1000;
      const out = JSON.parse(
        execFileSync(bin(), ["consumer.mjs"], {
          cwd: dir,
          encoding: "utf8",
          env: { ...process.env, API_URL: api.url, API_KEY: key },
        }),
      );
      assert.equal(out.node.split(".")[0], label.split(" ")[1]);
      assert.equal(out.created.name, `From Node ${out.node}`);
      assert.equal(out.created.status, "available");
      assert.ok(out.names.includes(out.created.name), "the iterator reached the new pet");
      assert.deepEqual(out.fetched, out.created);
      assert.deepEqual(out.missing, { status: 404, code: "not_found" });
      assert.equal(out.rateLimit.limit, 300);
      // The reset is the end of the window the request was counted in: after the consumer
      // started (not necessarily after it finished, which may be in the next minute).
      assert.ok(out.rateLimit.remaining < 300 && out.rateLimit.reset > startedSeconds);
    });

    it(`require()s the package from CommonJS on plain ${label}`, () => {
      writeFileSync(path.join(dir, "consumer.cjs"), CONSUMER_CJS);
      const out = JSON.parse(
        execFileSync(bin(), ["consumer.cjs"], {
          cwd: dir,
          encoding: "utf8",
          env: { ...process.env, API_URL: api.url, API_KEY: key },
        }),
      );
      assert.equal(out.node.split(".")[0], label.split(" ")[1]);
      assert.equal(out.created.name, `From require ${out.node}`);
      assert.deepEqual(
        { ...out.missing, line: undefined },
        { apiError: true, rateLimit: false, status: 404, code: "not_found", line: undefined },
      );
      assert.match(out.missing.line, /^ApiError: 404 not_found: .+ \(request [\w-]+\)$/);
    });
  }

  it("prints an uncaught ApiError in a few lines: message, stack and its fields, not the Response", () => {
    writeFileSync(path.join(dir, "uncaught.mjs"), UNCAUGHT_JS);
    const run = spawnSync(systemNode(20), ["uncaught.mjs"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, API_URL: api.url, API_KEY: key },
    });
    assert.equal(run.status, 1);
    const lines = run.stderr.trimEnd().split("\n");
    assert.ok(lines.length <= 25, `${lines.length} lines:\n${run.stderr}`);
    assert.match(run.stderr, /ApiError: No pet with id 999999999\./);
    assert.match(run.stderr, /code: 'not_found'/);
    assert.match(run.stderr, /status: 404/);
    assert.match(run.stderr, /requestId: '[\w-]+'/);
    assert.doesNotMatch(run.stderr, /Response|Headers|body:|\[Symbol/);
  });

  it("type-checks a consumer with tsc (NodeNext, no Workers types, library types checked too)", () => {
    writeFileSync(path.join(dir, "consumer.ts"), CONSUMER_TS);
    const tsconfig = {
      compilerOptions: { ...CONSUMER_COMPILER_OPTIONS, noEmit: true },
      files: ["consumer.ts"],
    };
    writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
    try {
      execFileSync(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: dir, encoding: "utf8" });
    } catch (e) {
      assert.fail(`tsc failed:\n${outputOf(e)}`);
    }
  });

  it("type-checks a CommonJS .cts consumer against the .d.cts types, and runs it on Node 20 and 22", () => {
    writeFileSync(path.join(dir, "consumer.cts"), CONSUMER_CTS);
    const tsconfig = {
      compilerOptions: { ...CONSUMER_COMPILER_OPTIONS, outDir: "out" },
      files: ["consumer.cts", "env.d.ts"],
    };
    // process.env without @types/node: the consumer only needs these two variables.
    writeFileSync(
      path.join(dir, "env.d.ts"),
      "declare const process: { env: Record<string, string | undefined> };\n",
    );
    writeFileSync(path.join(dir, "tsconfig.cts.json"), JSON.stringify(tsconfig));
    try {
      execFileSync(process.execPath, [TSC, "-p", "tsconfig.cts.json"], {
        cwd: dir,
        encoding: "utf8",
      });
    } catch (e) {
      assert.fail(`tsc failed:\n${outputOf(e)}`);
    }
    const compiled = readFileSync(path.join(dir, "out/consumer.cjs"), "utf8");
    assert.match(compiled, /require\("@animal-store\/client"\)/);
    for (const bin of [systemNode(20), projectNode22()]) {
      const out = JSON.parse(
        execFileSync(bin, ["out/consumer.cjs"], {
          cwd: dir,
          encoding: "utf8",
          env: { ...process.env, API_URL: api.url, API_KEY: key },
        }),
      );
      assert.deepEqual(out, { pet: "From .cts", found: true, code: "not_found" });
    }
  });
});
