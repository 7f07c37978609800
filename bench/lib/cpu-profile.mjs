// @ts-check
// Self time in a V8 CPU profile (the inspector's Profiler.stop answer), by function and by layer
// of the code: the pure half of `npm run bench:profile` (../profile.mjs).

/**
 * @typedef {{ functionName: string, scriptId: string, url: string, lineNumber: number,
 *   columnNumber: number }} CallFrame
 * @typedef {{ id: number, callFrame: CallFrame }} ProfileNode
 * @typedef {{ nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number,
 *   endTime: number }} CpuProfile
 * @typedef {{ starts: number[], modules: string[] }} ModuleMap
 *   Where each module of a bundle starts (0-based line, ascending) and its path.
 */

/**
 * The modules of an esbuild bundle as wrangler dev serves it (not minified): esbuild opens each
 * module's code with a `// path/of/module.ts` comment line.
 * @param {string} source
 * @returns {ModuleMap}
 */
export function modulesOfBundle(source) {
  /** @type {ModuleMap} */
  const map = { starts: [], modules: [] };
  source.split("\n").forEach((line, i) => {
    const m = line.match(/^\/\/ ((?:\.\.\/)*(?:[\w@.-]+\/)+[\w.@-]+\.(?:[cm]?[jt]sx?|json))$/);
    if (m?.[1]) {
      map.starts.push(i);
      map.modules.push(m[1].replace(/^(\.\.\/)+/, ""));
    }
  });
  return map;
}

/**
 * The module a 0-based line of the bundle belongs to, or null before the first.
 * @param {ModuleMap} map
 * @param {number} line
 */
export function moduleAt(map, line) {
  let lo = 0;
  let hi = map.starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((map.starts[mid] ?? Infinity) <= line) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return map.modules[found] ?? null;
}

/** V8's pseudo-entries: time not in any JavaScript function. */
const V8_ENTRIES = new Set(["(program)", "(garbage collector)", "(root)", "(idle)"]);

/**
 * The layer a module belongs to: the product's own code by folder (`src/middleware`, `src/lib`,
 * …), a package by name (`hono`, `zod`, `@hono/zod-openapi`), the bench's wrapper (`bench/api`);
 * `runtime` for what no module of the bundle holds (the runtime's built-ins, natives, wrangler's
 * own wrappers), and V8's pseudo-entries as themselves (`(garbage collector)`, `(program)`).
 * @param {string | null} module
 * @param {string} functionName
 */
export function layerOf(module, functionName) {
  if (V8_ENTRIES.has(functionName)) return functionName;
  if (!module) return "runtime";
  const pkg = module.match(/(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)/)?.[1];
  if (pkg) return pkg;
  const own = module.match(/^(?:src|bench)\/[^/]+(?=\/)/)?.[0];
  if (own) return own;
  if (/^src\/[^/]+$/.test(module)) return "src";
  return module;
}

/**
 * Self time per function and per layer, in ms and as a share of the busy time (every sample but
 * V8's `(idle)`), most first. `moduleOf(frame)` names the module a frame's code is in (null: none).
 * @param {CpuProfile} profile
 * @param {(frame: CallFrame) => string | null} moduleOf
 */
export function selfTime(profile, moduleOf) {
  /** @type {Map<number, ProfileNode>} */
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  /** @type {Map<number, number>} */
  const byNode = new Map();
  // timeDeltas[i] is the time from sample i − 1 to sample i: sample i's own time is the next delta.
  profile.samples.forEach((node, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    byNode.set(node, (byNode.get(node) ?? 0) + us);
  });
  /** @type {Map<string, { name: string, module: string | null, layer: string, us: number }>} */
  const functions = new Map();
  /** @type {Map<string, number>} */
  const layers = new Map();
  let busyUs = 0;
  let idleUs = 0;
  for (const [id, us] of byNode) {
    const frame = /** @type {ProfileNode} */ (nodes.get(id)).callFrame;
    const name = frame.functionName || "(anonymous)";
    if (name === "(idle)") {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const module = moduleOf(frame);
    const layer = layerOf(module, name);
    const where = module ?? frame.url;
    const k = `${name}\u0000${where}\u0000${frame.lineNumber}`;
    const f = functions.get(k) ?? { name, module: where || null, layer, us: 0 };
    f.us += us;
    functions.set(k, f);
    layers.set(layer, (layers.get(layer) ?? 0) + us);
  }
  /** @param {number} us */
  const share = (us) => (busyUs ? us / busyUs : 0);
  return {
    busyMs: busyUs / 1000,
    idleMs: idleUs / 1000,
    functions: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .map((f) => ({ ...f, ms: f.us / 1000, share: share(f.us) })),
    layers: [...layers.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([layer, us]) => ({ layer, ms: us / 1000, share: share(us) })),
  };
}
