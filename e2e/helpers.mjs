// Shared by the end-to-end tests (node --test): the project's Node binaries and a local API.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before } from "node:test";
import { cleanupNow, ROOT, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";

export { ROOT };

const major = (bin) =>
  Number(execFileSync(bin, ["-p", "process.versions.node"], { encoding: "utf8" }).split(".")[0]);

/** The first `node` on PATH outside node_modules whose major version is `want` (the machine's own Node). */
export function systemNode(want) {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir || dir.includes("node_modules")) continue;
    const bin = path.join(dir, "node");
    if (existsSync(bin) && major(bin) === want) return bin;
  }
  throw new Error(`no Node ${want} on PATH outside node_modules (PATH=${process.env.PATH})`);
}

/** Node 22 from the `node` devDependency (what every `npm run …` script runs on). */
export function projectNode22() {
  const bin = path.join(ROOT, "node_modules/node/bin/node");
  if (major(bin) !== 22) throw new Error(`${bin} is not Node 22`);
  return bin;
}

/**
 * Waits for the next UTC day when fewer than `seconds` are left in this one: a test that reads
 * back "today" (its usage, its audit entries) then runs within the UTC day its requests were
 * counted in. Near midnight only; the wait is at most `seconds`.
 */
export async function waitForRoomInDay(seconds) {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < seconds * 1000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

/**
 * A local API for the tests of the calling file: started before them, stopped after them, with
 * `vars` set over wrangler.toml's (e.g. CORS_ORIGINS), and `isUp` for a server that answers every
 * request with an error on purpose (see startWranglerDev).
 * `server.api` holds it (url, adminToken, stop) once the tests run.
 */
export function localApiForTests({ vars, isUp } = {}) {
  /** @type {{ api: Awaited<ReturnType<typeof startApiOnFreePorts>> | undefined }} */
  const server = { api: undefined };
  before(async () => {
    server.api = await startApiOnFreePorts({ localObservability: false, vars, isUp });
  });
  after(async () => {
    await server.api?.stop();
    cleanupNow();
  });
  return server;
}
