/// <reference types="vite/client" />
/**
 * Every script the project runs (scripts/, bench/: npm scripts, wrangler's [build] command, their
 * libraries) is type-checked by `npm run typecheck` (tsconfig.scripts.json). That config leaves
 * checkJs off, because the e2e tests beside the scripts are not typed, so a script is checked only
 * if it opts in with `// @ts-check`: a new script without it would pass typecheck unchecked.
 */
import { describe, expect, it } from "vitest";

// Read at transform time by Vite: the text of every script.
const scripts = import.meta.glob<string>(["../scripts/**/*.mjs", "../bench/**/*.mjs"], {
  query: "?raw",
  import: "default",
  eager: true,
});

/** Whether `text` opts in to type checking: `// @ts-check` before any code (after a shebang). */
function isTypeChecked(text: string): boolean {
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "// @ts-check") return true;
    if (trimmed.startsWith("#!") || trimmed === "") continue;
    return false;
  }
  return false;
}

describe("scripts are type-checked", () => {
  it("every .mjs under scripts/ and bench/ starts with // @ts-check", () => {
    const files = Object.keys(scripts);
    expect(files).toContain("../scripts/openapi.mjs");
    expect(files).toContain("../scripts/docs-assets.mjs");
    expect(files).toContain("../bench/run.mjs");
    expect(files.filter((file) => !isTypeChecked(scripts[file]!))).toEqual([]);
  });

  it("the check tells a checked script from an unchecked one", () => {
    expect(isTypeChecked("#!/usr/bin/env node\n// @ts-check\nimport x from 'y';\n")).toBe(true);
    expect(isTypeChecked("// @ts-check\n")).toBe(true);
    expect(isTypeChecked("import x from 'y';\n// @ts-check\n")).toBe(false);
  });
});
