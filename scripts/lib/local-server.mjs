// @ts-check
// Starts Workers locally for the end-to-end tests, `npm run openapi`, `npm run bench` and
// `npm run soak`, the way `npm run dev` does
// (local D1 migrations, then `wrangler dev`), but with a temporary persistence directory and a
// temporary ADMIN_TOKEN, so a run never touches the developer's .wrangler state or .dev.vars.
// The API runs from a snapshot of the working tree taken at the start, so edits made while a run
// is going on cannot reload the server mid-measurement (wrangler dev has no switch to stop
// watching). Every child runs in its own process group and is killed on exit, Ctrl-C or a crash.
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  cpSync,
  createWriteStream,
  existsSync,
  mkdtempSync,
  readdirSync,
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
 * Copies what the Worker is built from (src, migrations, configuration, and the `extra` paths)
 * into a temporary directory, with node_modules linked, and returns that directory.
 * @param {{ extra?: string[] }} [options]
 */
export function snapshotProject({ extra = [] } = {}) {
  const dir = makeTempDir("animal-store-app-");
  for (const entry of [
    ...extra,
    "src",
    "migrations",
    "wrangler.toml",
    "public",
    "scripts/docs-assets.mjs",
    "scripts/lib/openapi-templates.mjs",
    "scripts/lib/console-page.mjs",
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

/**
 * Runs wrangler (this checkout's, or the `wrangler.js` of another release's install) to
 * completion; resolves with its output, rejects on a non-zero exit.
 */
export function runWrangler(args, { cwd = ROOT, timeoutMs = 120_000, wranglerJs = WRANGLER } = {}) {
  installCleanup();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [wranglerJs, ...args], {
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

/**
 * Whether an answer to the probe means the server is up: any status below 500 (wrangler answers
 * 5xx itself while the Worker is still loading).
 * @param {Response} res
 */
const answersBelow500 = (res) => res.status < 500;

/** How long one readiness probe may take before the next is sent. */
const PROBE_MS = 2000;

/**
 * Whether `url` answered within `ms` with an answer `isUp` accepts. The wait is a timer of its
 * own besides the request's abort signal: a probe whose fetch never settles (seen on a machine
 * under heavy load, where no request ever reached the server) must not stall the wait for the
 * server, which then never times out either.
 * @param {string} url
 * @param {number} ms
 * @param {(res: Response) => boolean} isUp
 */
async function answeredWithin(url, ms, isUp) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms + 500);
  });
  const probe = (async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
    await res.arrayBuffer();
    return isUp(res);
  })();
  probe.catch(() => {}); // settled after the race is lost: nothing to report
  try {
    return await Promise.race([probe, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * @param {string} url
 * @param {import("node:child_process").ChildProcess} child
 * @param {string} logFile
 * @param {number} timeoutMs
 * @param {(res: Response) => boolean} isUp
 */
async function waitUntilAnswering(url, child, logFile, timeoutMs, isUp) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(
        `wrangler dev exited (${child.exitCode}):\n${existsSync(logFile) ? readFileSync(logFile, "utf8").slice(-4000) : ""}`,
      );
    try {
      if (await answeredWithin(url, PROBE_MS, isUp)) return;
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
 *   extraArgs?: string[], probePath: string, cwd?: string, localObservability?: boolean,
 *   entry?: string, persistTo?: string, wranglerJs?: string,
 *   isUp?: (res: Response) => boolean }} options
 * `persistTo`: the state directory (default `<dir>/<name>-state`); `wranglerJs`: another
 * release's wrangler (default this checkout's); `isUp`: whether an answer to `probePath` means
 * the server is up (default: a status below 500).
 */
export async function startWranglerDev({
  name,
  config,
  port,
  inspectorPort,
  dir,
  extraArgs = [],
  probePath,
  cwd = ROOT,
  localObservability = true,
  entry,
  persistTo = path.join(dir, `${name}-state`),
  wranglerJs = WRANGLER,
  isUp = answersBelow500,
}) {
  const logFile = path.join(dir, `${name}.log`);
  const log = createWriteStream(logFile);
  const args = [
    "dev",
    ...(entry ? [entry] : []),
    "--config",
    config,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    persistTo,
    "--show-interactive-dev-session=false",
    ...extraArgs,
  ];
  // X_LOCAL_OBSERVABILITY attaches wrangler's local trace collector or not (see startApi); set
  // either way, so a value exported in the caller's shell cannot contradict the report.
  const env = { ...ENV, X_LOCAL_OBSERVABILITY: localObservability ? "true" : "false" };
  const child = spawn(process.execPath, [wranglerJs, ...args], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  children.add(child);
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  const url = `http://127.0.0.1:${port}`;
  await waitUntilAnswering(url + probePath, child, logFile, 60_000, isUp);
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
 * The API as `npm run dev` runs it: local D1 migrations into a temporary persistence dir (or a
 * copy of the same migrated store, see MIGRATED_STATE_ENV), then
 * `wrangler dev` with random ADMIN_TOKEN, ADMIN_READ_TOKENS ("viewer"), CURSOR_SECRET, KEY_TAG_SECRET and
 * WEBHOOK_ENCRYPTION_KEY secrets
 * from a temporary env file.
 * `localObservability: false` turns off wrangler dev's local trace collector, which streams every
 * invocation's tail events (each span: fetch, Durable Object call, D1 query) into a SQLite-backed
 * object in the same workerd process, on the same cores as the Worker it measures.
 * `entry` runs another entry point with the API's configuration (the bench's, bench/api/index.ts,
 * relative to the project root; it must be in the snapshot `root`).
 * `isUp`: see startWranglerDev (a server misconfigured on purpose answers every request 500).
 * @param {{ port: number, inspectorPort: number, vars?: Record<string, string | number>,
 *   root?: string, localObservability?: boolean, entry?: string,
 *   isUp?: (res: Response) => boolean }} options
 */
export async function startApi({
  port,
  inspectorPort,
  vars = {},
  root = snapshotProject(),
  localObservability = true,
  entry,
  isUp,
}) {
  const dir = makeTempDir("animal-store-api-");
  const adminToken = `bench-admin-${randomBytes(18).toString("hex")}`;
  // A read-only admin token ("viewer"), for tests of what such a token may and may not do.
  const readToken = `read-only-${randomBytes(18).toString("hex")}`;
  const envFile = path.join(dir, "dev.env");
  writeFileSync(
    envFile,
    `ADMIN_TOKEN=${adminToken}\nADMIN_READ_TOKENS=viewer:${readToken}\n` +
      `CURSOR_SECRET=${randomBytes(24).toString("hex")}\n` +
      `KEY_TAG_SECRET=${randomBytes(24).toString("hex")}\n` +
      `WEBHOOK_ENCRYPTION_KEY=${randomBytes(32).toString("base64")}\n`,
    { mode: 0o600 },
  );
  const config = path.join(root, "wrangler.toml");
  const persist = path.join(dir, "api-state");
  await migratedStateInto(persist, root);
  const varArgs = Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]);
  const devOptions = {
    name: "api",
    config,
    port,
    inspectorPort,
    dir,
    extraArgs: ["--env-file", envFile, ...varArgs],
    probePath: "/v1/openapi.json",
    cwd: root,
    localObservability,
    entry,
    isUp,
  };
  const api = {
    ...(await startWranglerDev(devOptions)),
    adminToken,
    readToken,
    /**
     * Starts the API again on the same port, with the same secrets and stored state (D1, Durable
     * Objects), after `stop()`: a server that went down and came back.
     */
    async restart() {
      await api.stop();
      Object.assign(api, await startWranglerDev(devOptions));
    },
  };
  return api;
}

/** Local D1 migrations for `config` into the persistence dir `persist`, as `npm run dev` applies them. */
export function migrateLocal(config, persist, cwd) {
  return runWrangler(
    ["d1", "migrations", "apply", "DB", "--local", "--config", config, "--persist-to", persist],
    { cwd },
  );
}

/**
 * The environment variable naming a persistence directory that holds a fresh store with the
 * local D1 migrations applied (made by `makeMigratedState`), for every API this process and its
 * children start. Applying the migrations takes a wrangler process of its own (about 10 s of CPU),
 * so a run that starts many APIs (`npm run test:e2e`) applies them once and copies the result.
 */
export const MIGRATED_STATE_ENV = "ANIMAL_STORE_MIGRATED_STATE";

/** A digest of the project's D1 inputs in `root`: its migrations (names and SQL) and wrangler.toml. */
function migrationsDigestOf(root) {
  const hash = createHash("sha256");
  hash.update(readFileSync(path.join(root, "wrangler.toml")));
  const dir = path.join(root, "migrations");
  for (const name of readdirSync(dir).sort()) {
    hash.update(`\0${name}\0`);
    hash.update(readFileSync(path.join(dir, name)));
  }
  return hash.digest("hex");
}

const DIGEST_FILE = "migrations.sha256";

/**
 * Applies the local D1 migrations once into a new temporary persistence directory, and returns
 * it; `startApi` copies it (when its project's migrations and wrangler.toml are the same) instead
 * of applying them again. Set it in MIGRATED_STATE_ENV for child processes.
 */
export async function makeMigratedState(root = ROOT) {
  const state = path.join(makeTempDir("animal-store-migrated-"), "state");
  await migrateLocal(path.join(root, "wrangler.toml"), state, root);
  writeFileSync(path.join(state, DIGEST_FILE), migrationsDigestOf(root));
  return state;
}

/**
 * A store with `root`'s local D1 migrations applied, in `persist`: a copy of the migrated state
 * MIGRATED_STATE_ENV names when it was made from the same migrations and configuration, else
 * the migrations applied here (as `npm run dev` does).
 */
async function migratedStateInto(persist, root) {
  const template = process.env[MIGRATED_STATE_ENV];
  const digestFile = template && path.join(template, DIGEST_FILE);
  if (
    digestFile &&
    existsSync(digestFile) &&
    readFileSync(digestFile, "utf8") === migrationsDigestOf(root)
  ) {
    cpSync(template, persist, {
      recursive: true,
      filter: (source) => path.basename(source) !== DIGEST_FILE,
    });
    return;
  }
  await migrateLocal(path.join(root, "wrangler.toml"), persist, root);
}

/**
 * @typedef {{ id: string, key: string, plan: string, limits: { perMinute: number, perDay: number },
 *   usage?: unknown }} IssuedKey
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

/** A TCP port that was free a moment ago on 127.0.0.1 (for tests that start their own server). */
export async function freePort() {
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
