// @ts-check
// Self time in a V8 CPU profile (the inspector's Profiler.stop answer), by function and by layer
// of the code: the pure half of `npm run bench:profile` (../profile.mjs).

/**
 * @typedef {{ functionName: string, scriptId: string, url: string, lineNumber: number,
 *   columnNumber: number }} CallFrame
 * @typedef {{ id: number, callFrame: CallFrame }} ProfileNode
 * @typedef {{ nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number,
 *   endTime: number }} CpuProfile
 */

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/**
 * A source map's `mappings`, decoded: for each generated line (0-based), its segments in column
 * order as [generated column, source index, source line, name index or -1] (segments that name
 * no source are left out).
 * @param {string} mappings
 * @returns {[number, number, number, number][][]}
 */
export function decodeMappings(mappings) {
  /** @type {[number, number, number, number][][]} */
  const lines = [];
  let source = 0;
  let sourceLine = 0;
  let name = 0;
  for (const line of mappings.split(";")) {
    /** @type {[number, number, number, number][]} */
    const segments = [];
    let column = 0;
    for (const segment of line.split(",")) {
      if (!segment) continue;
      /** @type {number[]} */
      const fields = [];
      let value = 0;
      let shift = 0;
      for (const ch of segment) {
        const digit = BASE64.indexOf(ch);
        value += (digit & 31) << shift;
        if (digit & 32) shift += 5;
        else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      column += fields[0] ?? 0;
      if (fields.length < 4) continue;
      source += fields[1] ?? 0;
      sourceLine += fields[2] ?? 0;
      if (fields.length >= 5) name += fields[4] ?? 0;
      segments.push([column, source, sourceLine, fields.length >= 5 ? name : -1]);
    }
    lines.push(segments);
  }
  return lines;
}

/**
 * Where a generated position (0-based line and column) comes from in a decoded source map: the
 * last segment of its line at or before the column. `source` is the map's source path with any
 * leading `../` and build directories cut down to the project's own path (`src/…`, `bench/…`,
 * `node_modules/…`); `name` the original name the segment carries, if any.
 * @param {{ sources: string[], names: string[], lines: [number, number, number, number][][] }} map
 * @param {number} line
 * @param {number} column
 */
export function originalPosition(map, line, column) {
  const segments = map.lines[line] ?? [];
  let found = null;
  for (const segment of segments) {
    if (segment[0] > column) break;
    found = segment;
  }
  if (!found) return null;
  const raw = map.sources[found[1]] ?? "";
  const own = raw.match(/(?:^|\/)((?:node_modules|src|bench)\/.*)$/)?.[1];
  return {
    source: own ?? raw.replace(/^(\.\.\/)+/, ""),
    line: found[2] + 1,
    name: found[3] === -1 ? null : (map.names[found[3]] ?? null),
  };
}

/** V8's pseudo-entries: time not in any JavaScript function. */
const V8_ENTRIES = new Set(["(program)", "(garbage collector)", "(root)", "(idle)"]);

/**
 * The layer a module belongs to: the product's own code by folder (`src/middleware`, `src/lib`,
 * …), a package by name (`hono`, `zod`, `@hono/zod-openapi`), the bench's wrapper (`bench/api`);
 * the runtime's JavaScript modules by scheme (`runtime (node-internal:)`), wrangler dev's own
 * wrappers, `runtime` for native code (no module at all), and V8's pseudo-entries as themselves
 * (`(garbage collector)`, `(program)`).
 * @param {string | null} module
 * @param {string} functionName
 */
export function layerOf(module, functionName) {
  if (V8_ENTRIES.has(functionName)) return functionName;
  if (!module) return "runtime";
  const builtIn = module.match(/^(node-internal|cloudflare-internal|node|cloudflare):/)?.[1];
  if (builtIn) return `runtime (${builtIn}:)`;
  if (/miniflare|wrangler|__mf_/.test(module)) return "runtime (wrangler dev)";
  const pkg = module.match(/(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)/)?.[1];
  if (pkg) return pkg;
  const own = module.match(/^(?:src|bench)\/[^/]+(?=\/)/)?.[0];
  if (own) return own;
  if (/^src\/[^/]+$/.test(module)) return "src";
  return module;
}

/**
 * Self time per function and per layer, in ms and as a share of the busy time (every sample but
 * V8's `(idle)`), most first. `placeOf(frame)` says where a frame's code is: its module (a source
 * file, or the runtime module's URL; null: native code), the line there, and its original name
 * when the bundle renamed it.
 * @param {CpuProfile} profile
 * @param {(frame: CallFrame) => { module: string | null, line?: number, name?: string | null }} placeOf
 */
export function selfTime(profile, placeOf) {
  /** @type {Map<number, ProfileNode>} */
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  /** @type {Map<number, number>} */
  const byNode = new Map();
  // timeDeltas[i] is the time from sample i − 1 to sample i: sample i's own time is the next delta.
  profile.samples.forEach((node, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    byNode.set(node, (byNode.get(node) ?? 0) + us);
  });
  /** @type {Map<string, { name: string, module: string | null, line: number | null, layer: string, us: number }>} */
  const functions = new Map();
  /** @type {Map<string, number>} */
  const layers = new Map();
  let busyUs = 0;
  let idleUs = 0;
  for (const [id, us] of byNode) {
    const frame = /** @type {ProfileNode} */ (nodes.get(id)).callFrame;
    if (frame.functionName === "(idle)") {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const place = placeOf(frame);
    const name = place.name || frame.functionName || "(anonymous)";
    const layer = layerOf(place.module, frame.functionName);
    const line = place.line ?? null;
    const k = `${name}\u0000${place.module}\u0000${line}`;
    const f = functions.get(k) ?? { name, module: place.module, line, layer, us: 0 };
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

/**
 * Busy time by the product's code that asked for it: each sample goes to the innermost frame on
 * its stack that is the product's own (`src/…`), so what a product function spends in the
 * runtime (`Headers.set`, `new Response`, `crypto.subtle`), in Hono or in zod on its behalf
 * counts as its own. A sample with no product frame on its stack goes to the innermost package
 * or wrapper that made it (a Hono middleware, zod's validation), else to its own layer
 * (`runtime`, `(program)`, `(garbage collector)`). An async function resumed after an `await`
 * has only its own frame on the stack, so a middleware's work after `await next()` is its own,
 * not its caller's. Most first, by module (`src/…` file or layer) and by function.
 * @param {CpuProfile & { nodes: (ProfileNode & { children?: number[] })[] }} profile
 * @param {(frame: CallFrame) => { module: string | null, line?: number, name?: string | null }} placeOf
 */
export function timeByCaller(profile, placeOf) {
  /** @type {Map<number, ProfileNode & { children?: number[] }>} */
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  /** @type {Map<number, number>} */
  const parentOf = new Map();
  for (const n of profile.nodes) for (const child of n.children ?? []) parentOf.set(child, n.id);
  /** @type {Map<number, { module: string, name: string }>} */
  const ownerOfNode = new Map();
  /** The owner of node `id`'s samples (see above), worked out once per node. */
  const ownerOf = (/** @type {number} */ id) => {
    const known = ownerOfNode.get(id);
    if (known) return known;
    const leaf = /** @type {ProfileNode} */ (nodes.get(id)).callFrame;
    let fallback = null;
    let owner = null;
    for (let at = /** @type {number | undefined} */ (id); at !== undefined; at = parentOf.get(at)) {
      const frame = /** @type {ProfileNode} */ (nodes.get(at)).callFrame;
      const place = placeOf(frame);
      const layer = layerOf(place.module, frame.functionName);
      const name = place.name || frame.functionName || "(anonymous)";
      if (place.module?.startsWith("src/")) {
        owner = { module: place.module, name: `${name} (${place.module}:${place.line ?? "?"})` };
        break;
      }
      if (!fallback && layer !== "runtime" && !V8_ENTRIES.has(frame.functionName))
        fallback = { module: layer, name: `${name} (${layer})` };
    }
    const own = layerOf(placeOf(leaf).module, leaf.functionName);
    const result = owner ?? fallback ?? { module: own, name: own };
    ownerOfNode.set(id, result);
    return result;
  };
  /** @type {Map<string, number>} */
  const modules = new Map();
  /** @type {Map<string, number>} */
  const functions = new Map();
  let busyUs = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (/** @type {ProfileNode} */ (nodes.get(id)).callFrame.functionName === "(idle)") return;
    busyUs += us;
    const owner = ownerOf(id);
    modules.set(owner.module, (modules.get(owner.module) ?? 0) + us);
    functions.set(owner.name, (functions.get(owner.name) ?? 0) + us);
  });
  /** @param {Map<string, number>} m */
  const sorted = (m) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => ({ name, ms: us / 1000, share: busyUs ? us / busyUs : 0 }));
  return { busyMs: busyUs / 1000, modules: sorted(modules), functions: sorted(functions) };
}
