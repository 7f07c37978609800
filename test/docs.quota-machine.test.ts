/// <reference types="vite/client" />
// docs/quotas.md, "The machine": one table per quota tier, each transition naming the one
// function where it happens. Every name must be defined in the file its row names, so a
// function renamed or moved fails here until the table follows it.
import { describe, expect, it } from "vitest";

// Read at transform time by Vite.
const quotasDoc = Object.values(
  import.meta.glob<string>("../docs/quotas.md", { query: "?raw", import: "default", eager: true }),
)[0]!;
const sources = import.meta.glob<string>("../src/**/*.ts", {
  query: "?raw",
  import: "default",
  eager: true,
});

const TIERS = ["The key's object", "A location holder", "An isolate"];

/** The text of the `### ` subsections of "## The machine", by heading. */
function machineTables(doc: string): Map<string, string> {
  const machine = doc.split(/^## /m).find((section) => section.startsWith("The machine\n"));
  const tables = new Map<string, string>();
  for (const sub of machine?.split(/^### /m).slice(1) ?? []) {
    const newline = sub.indexOf("\n");
    tables.set(sub.slice(0, newline), sub.slice(newline + 1));
  }
  return tables;
}

interface Transition {
  row: string;
  name: string;
  file: string;
}

/** The transition rows of a table (its header and rule left out); a malformed cell throws. */
function transitionsOf(table: string): Transition[] {
  const rows = table.split("\n").filter((line) => line.startsWith("|"));
  return rows.slice(2).map((row) => {
    const cells = row.split("|").slice(1, -1);
    const where = cells.at(-1)?.trim() ?? "";
    const named = where.match(/^`(#?\w+)` in `([\w/.-]+\.ts)`$/);
    if (cells.length !== 4 || !named) throw new Error(`not a transition row: ${row}`);
    return { row, name: named[1]!, file: named[2]! };
  });
}

/** Whether `source` defines `name`: a function, a method (of any kind) or a constant. */
function defines(source: string, name: string): boolean {
  const id = name.replace("#", "\\#");
  const method = `^\\s*(?:(?:export|public|private|protected|static|async|override|get)\\s+)*${id}\\s*(?:<[^>]*>)?\\(`;
  const fn = `^(?:export\\s+)?(?:async\\s+)?function\\s+${id}\\s*[<(]`;
  const constant = `^(?:export\\s+)?const\\s+${id}\\s*[=:]`;
  return new RegExp(`${method}|${fn}|${constant}`, "m").test(source);
}

describe("docs/quotas.md: the machine's tables name functions that exist", () => {
  const tables = machineTables(quotasDoc);

  it("has one table per tier", () => {
    for (const tier of TIERS) {
      const heading = [...tables.keys()].find((h) => h.startsWith(tier));
      expect(heading, `a table for ${tier}`).toBeDefined();
      expect(transitionsOf(tables.get(heading!)!).length, tier).toBeGreaterThan(5);
    }
    expect(tables.size).toBe(TIERS.length);
  });

  for (const [tier, table] of machineTables(quotasDoc)) {
    it(`${tier}: every transition is defined where its row says`, () => {
      for (const { row, name, file } of transitionsOf(table)) {
        const source = sources[`../src/${file}`];
        expect(source, `src/${file} (named by ${row})`).toBeDefined();
        expect(defines(source!, name), `${name} in src/${file} (named by ${row})`).toBe(true);
      }
    });
  }

  it("would notice a name that is not defined, or a row that names none", () => {
    const source = "export function decide(a: number) {}\n  #grant(x: number): void {}\n";
    expect(defines(source, "decide")).toBe(true);
    expect(defines(source, "#grant")).toBe(true);
    expect(defines(source, "grant")).toBe(false);
    expect(defines(source, "decideOrThrow")).toBe(false);
    expect(() => transitionsOf("| a | b | c | d |\n|---|\n| s | e | t | decide |\n")).toThrow();
  });
});
