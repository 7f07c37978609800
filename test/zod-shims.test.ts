/// <reference types="vite/client" />
/**
 * The Worker's bundle swaps zod's JSON Schema conversion for a shim that throws
 * (src/lib/zod-json-schema-processors.ts, by `[alias]` in wrangler.toml), and with it the bounds a
 * schema derives from its checks. The tests run zod whole, so a read of one of them would pass
 * here and throw in the deployed Worker: no source file of the Worker reads one.
 */
import { describe, expect, it } from "vitest";

// Read at transform time by Vite: the source text of every module in src/.
const sources = import.meta.glob<string>("../src/**/*.{ts,tsx}", {
  query: "?raw",
  import: "default",
  eager: true,
});

/** The derived bounds of a zod schema that the shim's `aggregateChecks` computes. */
const DERIVED_BOUNDS = [
  "minLength",
  "maxLength",
  "minValue",
  "maxValue",
  "minDate",
  "maxDate",
  "isInt",
  "isFinite",
  "format",
];
/** A read of one of them as a property (`.maxLength`), not a call of a method so named. */
const READ = new RegExp(`\\.(${DERIVED_BOUNDS.join("|")})\\b(?!\\s*\\()`, "g");

/** "file:line: text" for every read of a derived bound in `files`. */
function boundReads(files: Record<string, string>): string[] {
  return Object.entries(files).flatMap(([file, text]) =>
    text
      .split("\n")
      .flatMap((line, i) => (line.match(READ) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
  );
}

describe("zod's shims in the Worker's bundle", () => {
  it("reads every source file", () => {
    expect(Object.keys(sources)).toContain("../src/lib/zod-json-schema-processors.ts");
    expect(Object.keys(sources).length).toBeGreaterThan(50);
  });

  it("no source file reads a schema's derived bounds (minLength, maxValue, format…)", () => {
    expect(boundReads(sources)).toEqual([]);
  });

  it("the check finds such a read, and lets calls of methods so named pass", () => {
    const made = {
      "a.ts": "const max = NameSchema.maxLength ?? 100;",
      "b.ts": "if (schema.format === 'email') {}",
      "c.ts": "Number.isFinite(x) && fmt.format(date) && s.min(1).maxLength",
    };
    expect(boundReads(made)).toEqual([
      "a.ts:1: const max = NameSchema.maxLength ?? 100;",
      "b.ts:1: if (schema.format === 'email') {}",
      "c.ts:1: Number.isFinite(x) && fmt.format(date) && s.min(1).maxLength",
    ]);
    expect(boundReads({ "d.ts": "Number.isFinite(x) && fmt.format(date)" })).toEqual([]);
  });
});
