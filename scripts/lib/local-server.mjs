// @ts-check
// Starts Workers locally for `npm run bench` and `npm run soak`, the way `npm run dev` does
// (local D1 migrations, then `wrangler dev`), but with a temporary persistence directory and a
// temporary ADMIN_TOKEN, so a run never touches the developer's .wrangler state or .dev.vars.
// The API runs from a snapshot of the working tree taken at the start, so edits made while a run
// is going on cannot reload the server mid-measurement (wrangler dev has no switch to stop
// watching). Every child runs in its own process group and is killed on exit, Ctrl-C or a crash.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  cpSync,
  createWriteStream,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(import.meta.url);
const WRANGLER = path.join(
  path.dirname(require.resolve("wrangler/package.json")),
  "bin/wrangler.js",
);
const ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  // No download of the sample Request.cf object (see scripts/dev.mjs): nothing leaves the machine.
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  NO_D1_WARNING: "true",
  FORCE_COLOR: "0",
};

const children = new Set();
const tempDirs = new Set();
let cleanupInstalled = false;

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* already gone */
  }
}

/** Synchronous, so it also works from process.on("exit"). */
export function cleanupNow() {
  for (const child of children) killGroup(child, "SIGKILL");
  children.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

function installCleanup() {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  process.on("exit", cleanupNow);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => {
      console.error(`\n${signal}: stopping local servers`);
      cleanupNow();
      process.exit(130);
    });
  }
  process.on("uncaughtException", (err) => {
    console.error(err);
    cleanupNow();
    process.exit(1);
  });
  process.on("unhandledRejection", (err) => {
    console.error(err);
    cleanupNow();
    process.exit(1);
  });
}

export function makeTempDir(prefix) {
  installCleanup();
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

/**
 * Copies what the Worker is built from (src, migrations, configuration) into a temporary
 * directory, with node_modules linked, and returns that directory.
 */
export function snapshotProject() {
  const dir = makeTempDir("animal-store-app-");
  for (const entry of [
    "src",
    "migrations",
    "wrangler.toml",
    "public",
    "scripts/docs-assets.mjs",
    "package.json",
    "tsconfig.json",
    "worker-configuration.d.ts",
  ]) {
    if (existsSync(path.join(ROOT, entry)))
      cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true });
  }
  symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
  return dir;
}

/** Runs wrangler to completion; resolves with its output, rejects on a non-zero exit. */
export function runWrangler(args, { cwd = ROOT, timeoutMs = 120_000 } = {}) {
  installCleanup();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRANGLER, ...args], {
      cwd,
      env: ENV,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    children.add(child);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => killGroup(child, "SIGKILL"), timeoutMs);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      if (code === 0) resolve(out);
      else
        reject(
          new Error(`wrangler ${args.join(" ")} failed (${signal ?? code}):\n${out.slice(-3000)}`),
        );
    });
  });
}

async function waitUntilAnswering(url, child, logFile, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(
        `wrangler dev exited (${child.exitCode}):\n${existsSync(logFile) ? readFileSync(logFile, "utf8").slice(-4000) : ""}`,
      );
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const tail = existsSync(logFile)
    ? readFileSync(logFile, "utf8").split("\n").slice(-40).join("\n")
    : "";
  throw new Error(
    `${url} did not answer within ${timeoutMs / 1000} s; the end of ${logFile}:\n${tail}`,
  );
}

/**
 * `wrangler dev` on 127.0.0.1:port. Its output (including the API's access log) goes to a log
 * file in the temp dir, read but not parsed, so a full pipe never stalls the server.
 * @param {{ name: string, config: string, port: number, inspectorPort: number, dir: string,
 *   extraArgs?: string[], probePath: string, cwd?: string, localObservability?: boolean }} options
 */
async function startWranglerDev({
  name,
  config,
  port,
  inspectorPort,
  dir,
  extraArgs = [],
  probePath,
  cwd = ROOT,
  localObservability = true,
}) {
  const logFile = path.join(dir, `${name}.log`);
  const log = createWriteStream(logFile);
  const args = [
    "dev",
    "--config",
    config,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    path.join(dir, `${name}-state`),
    "--show-interactive-dev-session=false",
    ...extraArgs,
  ];
  // X_LOCAL_OBSERVABILITY attaches wrangler's local trace collector or not (see startApi); set
  // either way, so a value exported in the caller's shell cannot contradict the report.
  const env = { ...ENV, X_LOCAL_OBSERVABILITY: localObservability ? "true" : "false" };
  const child = spawn(process.execPath, [WRANGLER, ...args], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  children.add(child);
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  const url = `http://127.0.0.1:${port}`;
  await waitUntilAnswering(url + probePath, child, logFile, 60_000);
  return {
    url,
    logFile,
    /** The last lines of the server's output other than per-request logs, for diagnosing a failure. */
    tail(lines = 30) {
      const text = existsSync(logFile) ? readFileSync(logFile, "utf8") : "";
      return text
        .split("\n")
        .filter(
          (l) => l && !l.startsWith('{"requestId"') && !/^\[wrangler:info\] [A-Z]+ \//.test(l),
        )
        .slice(-lines)
        .join("\n");
    },
    async stop() {
      if (child.exitCode !== null) return children.delete(child);
      const exited = new Promise((r) => child.once("exit", r));
      killGroup(child, "SIGTERM");
      const timer = setTimeout(() => killGroup(child, "SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
      killGroup(child, "SIGKILL"); // any workerd left behind in the group
      children.delete(child);
    },
  };
}

/**
 * The API as `npm run dev` runs it: local D1 migrations into a temporary persistence dir, then
 * `wrangler dev` with random ADMIN_TOKEN, ADMIN_READ_TOKENS ("viewer") and CURSOR_SECRET secrets
 * from a temporary env file.
 * `localObservability: false` turns off wrangler dev's local trace collector, which streams every
 * invocation's tail events (each span: fetch, Durable Object call, D1 query) into a SQLite-backed
 * object in the same workerd process, on the same cores as the Worker it measures.
 */
/**
 * @param {{ port: number, inspectorPort: number, vars?: Record<string, string>, root?: string,
 *   localObservability?: boolean }} options
 */
export async function startApi({
  port,
  inspectorPort,
  vars = {},
  root = snapshotProject(),
  localObservability = true,
}) {
  const dir = makeTempDir("animal-store-api-");
  const adminToken = `bench-admin-${randomBytes(18).toString("hex")}`;
  // A read-only admin token ("viewer"), for tests of what such a token may and may not do.
  const readToken = `read-only-${randomBytes(18).toString("hex")}`;
  const envFile = path.join(dir, "dev.env");
  writeFileSync(
    envFile,
    `ADMIN_TOKEN=${adminToken}\nADMIN_READ_TOKENS=viewer:${readToken}\n` +
      `CURSOR_SECRET=${randomBytes(24).toString("hex")}\n`,
    { mode: 0o600 },
  );
  const config = path.join(root, "wrangler.toml");
  const persist = path.join(dir, "api-state");
  await migrateLocal(config, persist, root);
  const varArgs = Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]);
  const server = await startWranglerDev({
    name: "api",
    config,
    port,
    inspectorPort,
    dir,
    extraArgs: ["--env-file", envFile, ...varArgs],
    probePath: "/v1/openapi.json",
    cwd: root,
    localObservability,
  });
  return { ...server, adminToken, readToken };
}

/** The do-nothing reference Worker in bench/reference, also under `wrangler dev`. */
export async function startReference({ port, inspectorPort, localObservability = true }) {
  const dir = makeTempDir("animal-store-ref-");
  const config = path.join(ROOT, "bench/reference/wrangler.toml");
  return startWranglerDev({
    name: "reference",
    config,
    port,
    inspectorPort,
    dir,
    probePath: "/v1/pets",
    cwd: path.join(ROOT, "bench/reference"),
    localObservability,
  });
}

/**
 * The floor Worker in bench/floor (one Durable Object RPC + one D1 query per list), under
 * `wrangler dev` with the API's migrations in a temporary persistence dir and `pets` pets.
 */
export async function startFloor({
  port,
  inspectorPort,
  localObservability = true,
  pets = 200,
  vars = {},
}) {
  const dir = makeTempDir("animal-store-floor-");
  const cwd = path.join(ROOT, "bench/floor");
  const config = path.join(cwd, "wrangler.toml");
  const persist = path.join(dir, "floor-state");
  await migrateLocal(config, persist, cwd);
  const server = await startWranglerDev({
    name: "floor",
    config,
    port,
    inspectorPort,
    dir,
    extraArgs: Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
    probePath: "/v1/pets",
    cwd,
    localObservability,
  });
  const res = await fetch(`${server.url}/seed?n=${pets}`, { method: "POST" });
  if (res.status !== 201)
    throw new Error(`seeding the floor Worker failed: ${res.status} ${await res.text()}`);
  return server;
}

/** Local D1 migrations for `config` into the persistence dir `persist`, as `npm run dev` applies them. */
function migrateLocal(config, persist, cwd) {
  return runWrangler(
    ["d1", "migrations", "apply", "DB", "--local", "--config", config, "--persist-to", persist],
    { cwd },
  );
}

/** Limits for keys that must never be refused (benchmark and seeding keys). */
export const UNLIMITED = { perMinute: 1_000_000_000_000, perDay: 1_000_000_000_000 };

/**
 * @typedef {{ id: string, key: string, plan: string, usage?: unknown }} IssuedKey
 * A key as the admin API returns it on creation (with its secret).
 */

/**
 * Issues a key through the admin API, as an operator would.
 * @param {{ url: string, adminToken: string }} api
 * @param {{ name: string, plan: string, limits?: { perMinute: number, perDay: number } }} spec
 * @returns {Promise<IssuedKey>}
 */
export async function issueKey(api, { name, plan, limits }) {
  const res = await fetch(`${api.url}/admin/v1/keys`, {
    method: "POST",
    headers: { Authorization: `Bearer ${api.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name, plan, ...(limits ? { limits } : {}) }),
  });
  const body = /** @type {IssuedKey} */ (await res.json());
  if (res.status !== 201)
    throw new Error(`issuing a ${plan} key failed: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** Creates pets with up to `concurrency` requests in flight; returns the created pets in order. */
export async function seedPets(api, key, count, { concurrency = 8, prefix = "seed" } = {}) {
  const statuses = ["available", "pending", "sold"];
  const created = new Array(count);
  let next = 0;
  async function worker() {
    while (next < count) {
      const i = next++;
      const pet = { name: `${prefix}-${i}`, categoryId: (i % 7) + 1, status: statuses[i % 3] };
      const res = await fetch(`${api.url}/v1/pets`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: JSON.stringify(pet),
      });
      const body = await res.json();
      if (res.status !== 201)
        throw new Error(`seeding failed: ${res.status} ${JSON.stringify(body)}`);
      created[i] = body;
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return created;
}

export function parseArgs(argv, defaults) {
  const out = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const m = argv[i].match(/^--([a-z][a-z0-9-]*)(?:=(.*))?$/);
    if (!m) throw new Error(`unknown argument ${argv[i]}`);
    const name = m[1].replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(name in defaults))
      throw new Error(`unknown option --${m[1]}; known: ${Object.keys(defaults).join(", ")}`);
    const value = m[2] ?? argv[++i];
    out[name] = typeof defaults[name] === "number" ? Number(value) : value;
    if (typeof defaults[name] === "number" && !Number.isFinite(out[name]))
      throw new Error(`--${m[1]} needs a number`);
  }
  return out;
}

/** A TCP port that was free a moment ago on 127.0.0.1 (for tests that start their own server). */
async function freePort() {
  const { createServer } = await import("node:net");
  return /** @type {Promise<number>} */ (
    new Promise((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = /** @type {import("node:net").AddressInfo} */ (server.address());
        server.close(() => resolve(address.port));
      });
    })
  );
}

/** The API under `wrangler dev` on free ports (server and inspector), for tests and tools. */
export async function startApiOnFreePorts(options = {}) {
  return startApi({ port: await freePort(), inspectorPort: await freePort(), ...options });
}
