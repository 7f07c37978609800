import { describe, expect, it } from "vitest";
import { layerOf, moduleAt, modulesOfBundle, selfTime } from "../lib/cpu-profile.mjs";

const BUNDLE = [
  "var __defProp = Object.defineProperty;", // 0: esbuild's prelude, in no module
  "// node_modules/hono/dist/hono-base.js", // 1
  "var Hono = class {};",
  "// ../node_modules/zod/v4/core/core.js", // 3 (a path above the bundle's root)
  "function $constructor() {}",
  "// src/middleware/enforce-quota.ts", // 5
  "// not a module: a comment in the code",
  "function enforceQuota() {}",
  "// src/app.ts", // 8
  "function createApp() {}",
].join("\n");

describe("bench:profile's modules of a bundle", () => {
  it("finds each module from esbuild's path comments, and places a line in its module", () => {
    const map = modulesOfBundle(BUNDLE);
    expect(map.modules).toEqual([
      "node_modules/hono/dist/hono-base.js",
      "node_modules/zod/v4/core/core.js",
      "src/middleware/enforce-quota.ts",
      "src/app.ts",
    ]);
    expect(map.starts).toEqual([1, 3, 5, 8]);
    expect(moduleAt(map, 0)).toBeNull();
    expect(moduleAt(map, 2)).toBe("node_modules/hono/dist/hono-base.js");
    expect(moduleAt(map, 7)).toBe("src/middleware/enforce-quota.ts");
    expect(moduleAt(map, 8)).toBe("src/app.ts");
    expect(moduleAt(map, 99)).toBe("src/app.ts");
  });

  it("names a module's layer: the product's folder, a package, the runtime, or V8's own", () => {
    expect(layerOf("src/middleware/enforce-quota.ts", "enforceQuota")).toBe("src/middleware");
    expect(layerOf("src/app.ts", "createApp")).toBe("src");
    expect(layerOf("node_modules/hono/dist/hono-base.js", "dispatch")).toBe("hono");
    expect(layerOf("node_modules/@hono/zod-openapi/dist/index.js", "x")).toBe("@hono/zod-openapi");
    expect(layerOf("bench/api/simulated-network.ts", "roundTrip")).toBe("bench/api");
    expect(layerOf(null, "fetch")).toBe("runtime");
    expect(layerOf(null, "(garbage collector)")).toBe("(garbage collector)");
    expect(layerOf("src/app.ts", "(program)")).toBe("(program)");
  });
});

describe("bench:profile's self time", () => {
  const frame = (functionName: string, lineNumber: number) => ({
    functionName,
    scriptId: "1",
    url: "index.js",
    lineNumber,
    columnNumber: 0,
  });
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
    const map = modulesOfBundle(BUNDLE);
    const self = selfTime(profile, (f) => moduleAt(map, f.lineNumber));
    expect(self.idleMs).toBe(1);
    expect(self.busyMs).toBe(1);
    expect(self.functions.map((f) => [f.name, f.layer, f.us])).toEqual([
      ["enforceQuota", "src/middleware", 500],
      ["(anonymous)", "src", 300],
      ["dispatch", "hono", 100],
      ["(garbage collector)", "(garbage collector)", 100],
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
