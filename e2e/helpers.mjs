// @ts-check
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
 * Starts `server` listening on a port of 127.0.0.1 the system picks; resolves with that port.
 * @param {import("node:net").Server} server
 * @returns {Promise<number>}
 */
export async function listenOnFreePort(server) {
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(undefined));
  });
  return /** @type {import("node:net").AddressInfo} */ (server.address()).port;
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
 * `server.api` is it (url, adminToken, stop) once the tests run; read before, it throws.
 * @param {{ vars?: Record<string, string | number>, isUp?: (res: Response) => boolean }} [options]
 */
export function localApiForTests({ vars, isUp } = {}) {
  /** @type {Awaited<ReturnType<typeof startApiOnFreePorts>> | undefined} */
  let started;
  before(async () => {
    started = await startApiOnFreePorts({ localObservability: false, vars, isUp });
  });
  after(async () => {
    await started?.stop();
    cleanupNow();
  });
  return {
    get api() {
      if (!started) throw new Error("the local API is not started: read server.api in a test");
      return started;
    },
  };
}
