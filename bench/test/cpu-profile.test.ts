import { describe, expect, it } from "vitest";
import {
  decodeMappings,
  layerOf,
  originalPosition,
  selfTime,
  timeByCaller,
} from "../lib/cpu-profile.mjs";

// Segments by hand: line 0 → app.ts 1:0, then (column 10) hono-base.js 6:0 named createApp;
// line 1 none; line 2 (column 4) hono-base.js 8:2; line 3 (column 100, two digits; source and
// line going back) app.ts 5:2.
const MAPPINGS = "AAAA,UCKAA;;IAEE;oGDHA";
const MAP = {
  sources: ["../../src/app.ts", "../node_modules/hono/dist/hono-base.js"],
  names: ["createApp"],
  lines: decodeMappings(MAPPINGS),
};

describe("bench:profile's source map", () => {
  it("decodes the mappings: column, source, line and name of each segment", () => {
    expect(MAP.lines).toEqual([
      [
        [0, 0, 0, -1],
        [10, 1, 5, 0],
      ],
      [],
      [[4, 1, 7, -1]],
      [[100, 0, 4, -1]],
    ]);
  });

  it("places a generated position in its source file and line, with the original name", () => {
    expect(originalPosition(MAP, 0, 3)).toEqual({ source: "src/app.ts", line: 1, name: null });
    expect(originalPosition(MAP, 0, 12)).toEqual({
      source: "node_modules/hono/dist/hono-base.js",
      line: 6,
      name: "createApp",
    });
    expect(originalPosition(MAP, 1, 5)).toBeNull();
    expect(originalPosition(MAP, 2, 3)).toBeNull();
    expect(originalPosition(MAP, 3, 500)).toEqual({ source: "src/app.ts", line: 5, name: null });
    const absolute = { ...MAP, sources: ["/tmp/animal-store-app-x/src/lib/etag.ts"] };
    expect(originalPosition(absolute, 0, 0)?.source).toBe("src/lib/etag.ts");
  });

  it("names a module's layer: the product's folder, a package, the runtime, or V8's own", () => {
    expect(layerOf("src/middleware/enforce-quota.ts", "enforceQuota")).toBe("src/middleware");
    expect(layerOf("src/app.ts", "createApp")).toBe("src");
    expect(layerOf("node_modules/hono/dist/hono-base.js", "dispatch")).toBe("hono");
    expect(layerOf("node_modules/@hono/zod-openapi/dist/index.js", "x")).toBe("@hono/zod-openapi");
    expect(layerOf("bench/api/simulated-network.ts", "roundTrip")).toBe("bench/api");
    expect(layerOf(null, "fetch")).toBe("runtime");
    expect(layerOf("node-internal:internal_timers", "setTimeout")).toBe("runtime (node-internal:)");
    expect(layerOf("cloudflare-internal:d1-api", "run")).toBe("runtime (cloudflare-internal:)");
    expect(layerOf("__mf_do_wrapper_entry.js", "fetch")).toBe("runtime (wrangler dev)");
    expect(layerOf(null, "(garbage collector)")).toBe("(garbage collector)");
    expect(layerOf("src/app.ts", "(program)")).toBe("(program)");
  });
});

/** A call frame of the bundle's index.js at `lineNumber` (what a CPU profile records). */
const frame = (functionName: string, lineNumber: number) => ({
  functionName,
  scriptId: "1",
  url: "index.js",
  lineNumber,
  columnNumber: 0,
});

describe("bench:profile's self time", () => {
  const profile = {
    nodes: [
      { id: 1, callFrame: frame("(root)", -1) },
      { id: 2, callFrame: frame("(idle)", -1) },
      { id: 3, callFrame: frame("dispatch", 2) },
      { id: 4, callFrame: frame("enforceQuota", 7) },
      { id: 5, callFrame: frame("(garbage collector)", -1) },
      { id: 6, callFrame: frame("", 9) },
    ],
    // Each sample's own time is the delta to the next sample (the last: none).
    samples: [3, 4, 4, 2, 5, 6, 3],
    timeDeltas: [0, 100, 300, 200, 1000, 100, 300],
    startTime: 0,
    endTime: 2000,
  };

  it("adds each sample's time to its function and layer, leaves idle out of the busy time", () => {
    // Lines 2 and 9 are the bundle's hono and app code; the rest is native.
    const places: Record<number, { module: string; line: number }> = {
      2: { module: "node_modules/hono/dist/hono-base.js", line: 40 },
      7: { module: "src/middleware/enforce-quota.ts", line: 12 },
      9: { module: "src/app.ts", line: 3 },
    };
    const self = selfTime(profile, (f) => places[f.lineNumber] ?? { module: null });
    expect(self.idleMs).toBe(1);
    expect(self.busyMs).toBe(1);
    expect(self.functions.map((f) => [f.name, f.layer, f.us, f.line])).toEqual([
      ["enforceQuota", "src/middleware", 500, 12],
      ["(anonymous)", "src", 300, 3],
      ["dispatch", "hono", 100, 40],
      ["(garbage collector)", "(garbage collector)", 100, null],
    ]);
    expect(self.functions[0]?.share).toBe(0.5);
    expect(self.layers).toEqual([
      { layer: "src/middleware", ms: 0.5, share: 0.5 },
      { layer: "src", ms: 0.3, share: 0.3 },
      { layer: "hono", ms: 0.1, share: 0.1 },
      { layer: "(garbage collector)", ms: 0.1, share: 0.1 },
    ]);
  });
});

describe("bench:profile's time by the product's code that asked for it", () => {
  // (root) → dispatch (hono) → the handler (src) → c.json (hono) → Response (native);
  // (root) → dispatch → validator (zod) → a native frame; (root) → (program); (root) → (idle).
  const profile = {
    nodes: [
      { id: 1, callFrame: frame("(root)", -1), children: [2, 7, 8] },
      { id: 2, callFrame: frame("dispatch", 2), children: [3, 5] },
      { id: 3, callFrame: frame("handler", 9), children: [4] },
      { id: 4, callFrame: frame("json", 2), children: [9] },
      { id: 9, callFrame: frame("Response", -1) },
      { id: 5, callFrame: frame("parse", 5), children: [6] },
      { id: 6, callFrame: frame("", -1) },
      { id: 7, callFrame: frame("(program)", -1) },
      { id: 8, callFrame: frame("(idle)", -1) },
    ],
    samples: [9, 4, 3, 6, 2, 7, 8, 9],
    timeDeltas: [0, 100, 200, 300, 400, 500, 600, 700],
    startTime: 0,
    endTime: 3000,
  };
  const places: Record<number, { module: string; line: number }> = {
    2: { module: "node_modules/hono/dist/context.js", line: 40 },
    5: { module: "node_modules/zod/v4/core/schemas.js", line: 7 },
    9: { module: "src/routes/pets/routes.ts", line: 164 },
  };

  it("gives native and package time to the innermost product frame, else to the package, else to its layer", () => {
    const byCaller = timeByCaller(profile, (f) => places[f.lineNumber] ?? { module: null });
    // 100 + 200 + 300 under the handler (its own, c.json's and Response's), 400 in zod, 500 in
    // hono's dispatch, 600 in (program); the idle sample and the last (no delta after it) count nothing.
    expect(byCaller.busyMs).toBe(2.1);
    expect(byCaller.modules.map((m) => [m.name, m.ms])).toEqual([
      ["src/routes/pets/routes.ts", 0.6],
      ["(program)", 0.6],
      ["hono", 0.5],
      ["zod", 0.4],
    ]);
    expect(byCaller.functions[0]).toEqual({
      name: "handler (src/routes/pets/routes.ts:164)",
      ms: 0.6,
      share: 0.6 / 2.1,
    });
  });
});
