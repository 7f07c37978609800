// @ts-check
// The Workers a bench run measures, each under `wrangler dev` on loopback with its own temporary
// state (scripts/lib/local-server.mjs): the API behind the simulated network (the bench entry
// Worker, bench/api/index.ts), the do-nothing reference (bench/reference) and the floor
// (bench/floor); and the keys and pets a run needs.
import path from "node:path";
import {
  makeTempDir,
  migrateLocal,
  ROOT,
  snapshotProject,
  startApi,
  startWranglerDev,
} from "../../scripts/lib/local-server.mjs";

/** The bench entry Worker, relative to the project root. */
export const BENCH_ENTRY = "bench/api/index.ts";

/**
 * The bench's `--var`s for a simulated network (bench/api/simulated-network.ts).
 * @param {{ limiterRtt: number, d1Rtt: number, localRtt?: number }} network round trips in ms
 */
export function networkVars({ limiterRtt, d1Rtt, localRtt = 0 }) {
  return { BENCH_LIMITER_RTT_MS: limiterRtt, BENCH_D1_RTT_MS: d1Rtt, BENCH_LOCAL_RTT_MS: localRtt };
}

/**
 * The API as the bench entry Worker, from a snapshot of the working tree, behind the simulated
 * network, with temporary state and admin token.
 * `root` is a snapshot with bench/api in it (default: a new one).
 * @param {{ port: number, inspectorPort: number,
 *   network: { limiterRtt: number, d1Rtt: number, localRtt?: number },
 *   vars?: Record<string, string | number>, localObservability?: boolean, root?: string }} options
 */
export function startBenchApi({
  port,
  inspectorPort,
  network,
  vars = {},
  localObservability,
  root = snapshotProject({ extra: ["bench/api"] }),
}) {
  return startApi({
    port,
    inspectorPort,
    root,
    entry: BENCH_ENTRY,
    vars: { ...vars, ...networkVars(network) },
    localObservability,
  });
}

/**
 * The do-nothing reference Worker in bench/reference, also under `wrangler dev`.
 * @param {{ port: number, inspectorPort: number, localObservability?: boolean }} options
 */
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
 * `wrangler dev` with the API's migrations in a temporary persistence dir and `pets` pets, behind
 * the same simulated round trips as the API.
 * @param {{ port: number, inspectorPort: number, network: { limiterRtt: number, d1Rtt: number },
 *   localObservability?: boolean, pets?: number }} options
 */
export async function startFloor({
  port,
  inspectorPort,
  network,
  localObservability = true,
  pets = 200,
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
    extraArgs: Object.entries(networkVars(network)).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
    probePath: "/v1/pets",
    cwd,
    localObservability,
  });
  const res = await fetch(`${server.url}/seed?n=${pets}`, { method: "POST" });
  if (res.status !== 201)
    throw new Error(`seeding the floor Worker failed: ${res.status} ${await res.text()}`);
  return server;
}

/** Limits for keys that must never be refused (benchmark and seeding keys). */
export const UNLIMITED = { perMinute: 1_000_000_000_000, perDay: 1_000_000_000_000 };

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
