// The client as a consumer gets it: `npm pack` the package, install the tarball into a fresh
// project, then (a) call a running local API from plain Node 20 and Node 22 and (b) type-check a
// consumer file with tsc (moduleResolution NodeNext, no Workers types).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { cleanupNow, issueKey, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";
import { projectNode22, ROOT, systemNode } from "./helpers.mjs";

const CONSUMER_JS = `
import { AnimalStoreError, createAnimalStoreClient } from "@animal-store/client";
const store = createAnimalStoreClient({ baseUrl: process.env.API_URL, apiKey: process.env.API_KEY });
const tag = process.versions.node;
const created = await store.createPet({ name: "From Node " + tag, categoryId: 2 }, { idempotencyKey: crypto.randomUUID() });
const names = [];
for await (const pet of store.pets({ limit: 1 })) names.push(pet.name);
const fetched = await store.getPet(created.id);
const missing = await store.getPet(999999999).catch((e) => e);
console.log(JSON.stringify({ node: tag, created, names, fetched, rateLimit: store.rateLimit, missing: missing instanceof AnimalStoreError ? { status: missing.status, code: missing.code } : String(missing) }));
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
    const dts = readFileSync(
      path.join(dir, "node_modules/@animal-store/client/dist/index.d.ts"),
      "utf8",
    );
    assert.doesNotMatch(dts, /workers-types|D1Database|DurableObject|SqlStorage|from "hono/);
  });

  for (const [label, bin] of [
    ["Node 20", () => systemNode(20)],
    ["Node 22", projectNode22],
  ]) {
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
  }

  it("type-checks a consumer with tsc (NodeNext, no Workers types, library types checked too)", () => {
    writeFileSync(path.join(dir, "consumer.ts"), CONSUMER_TS);
    const tsconfig = {
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        lib: ["ES2022", "DOM"],
        types: [],
        strict: true,
        skipLibCheck: false,
        noEmit: true,
      },
      files: ["consumer.ts"],
    };
    writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
    const tsc = path.join(ROOT, "node_modules/typescript/bin/tsc");
    try {
      execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: dir, encoding: "utf8" });
    } catch (e) {
      assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`);
    }
  });
});
