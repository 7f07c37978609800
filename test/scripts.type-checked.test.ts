/// <reference types="vite/client" />
/**
 * Every script the project runs (scripts/, bench/: npm scripts, wrangler's [build] command, their
 * libraries) and every end-to-end test (e2e/) is type-checked by `npm run typecheck`
 * (tsconfig.scripts.json; the browser tests, whose page functions use the DOM, by
 * tsconfig.e2e-browser.json). Those configs leave checkJs off, so a file is checked only if it
 * opts in with `// @ts-check`: a new file without it would pass typecheck unchecked.
 */
import { describe, expect, it } from "vitest";

// Read at transform time by Vite: the text of every script.
const scripts = import.meta.glob<string>(
  ["../scripts/**/*.mjs", "../bench/**/*.mjs", "../e2e/**/*.mjs"],
  { query: "?raw", import: "default", eager: true },
);

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
  it("every .mjs under scripts/, bench/ and e2e/ starts with // @ts-check", () => {
    const files = Object.keys(scripts);
    expect(files).toContain("../scripts/openapi.mjs");
    expect(files).toContain("../scripts/docs-assets.mjs");
    expect(files).toContain("../bench/run.mjs");
    expect(files).toContain("../e2e/helpers.mjs");
    expect(files).toContain("../e2e/console.browser.test.mjs");
    expect(files).toContain("../e2e/fixtures/stand-in-wrangler.mjs");
    expect(files.filter((file) => !isTypeChecked(scripts[file]!))).toEqual([]);
  });

  it("the check tells a checked script from an unchecked one", () => {
    expect(isTypeChecked("#!/usr/bin/env node\n// @ts-check\nimport x from 'y';\n")).toBe(true);
    expect(isTypeChecked("// @ts-check\n")).toBe(true);
    expect(isTypeChecked("import x from 'y';\n// @ts-check\n")).toBe(false);
  });
});
