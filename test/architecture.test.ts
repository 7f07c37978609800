/// <reference types="vite/client" />
/**
 * The layout rule, enforced: each folder of src/ has one job, and imports point one way:
 *
 *   lib ← quota ← schemas ← db ← objects ← auth ← middleware ← routes ← app (src/*.ts)
 *
 * A file may import from its own folder and from folders to its left, never to its right, and
 * sibling route folders (routes/pets, routes/admin) do not import each other. So quota/ (the
 * rules and the lease holder) imports nothing from objects/ or middleware/, while objects/ (the
 * Durable Objects and their stub clients) applies quota/'s rules. Each check is also run on a
 * small made-up layout that breaks it, so a check that could no longer fail fails here.
 */
import { describe, expect, it } from "vitest";

const LAYERS = ["lib", "quota", "schemas", "db", "objects", "auth", "middleware", "routes", "app"];

// Read at transform time by Vite: the source text of every module in src/.
const sources = import.meta.glob<string>("../src/**/*.{ts,tsx}", {
  query: "?raw",
  import: "default",
  eager: true,
});
type Files = Record<string, string>;
const files: Files = Object.fromEntries(
  Object.entries(sources).map(([path, text]) => [path.replace("../src/", ""), text]),
);

/** "routes/pets/routes.ts" → "routes/pets"; "auth/api-key.ts" → "auth"; "app.ts" → "app". */
function unitOf(file: string): string {
  const parts = file.split("/");
  if (parts.length === 1) return "app";
  return parts[0] === "routes" && parts.length > 2 ? `routes/${parts[1]}` : parts[0]!;
}
const layerOf = (file: string) => LAYERS.indexOf(unitOf(file).split("/")[0]!);

function resolve(files: Files, from: string, specifier: string): string {
  const parts = from.split("/").slice(0, -1);
  for (const segment of specifier.split("/")) {
    if (segment === "..") parts.pop();
    else if (segment !== ".") parts.push(segment);
  }
  const base = parts.join("/");
  return files[`${base}.ts`] === undefined && files[`${base}.tsx`] !== undefined
    ? `${base}.tsx`
    : `${base}.ts`;
}

const IMPORT = /^(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms;

interface Import {
  specifier: string;
  target: string | null;
  /** `import type …` / `export type …`: erased at build time. */
  typeOnly: boolean;
}

function importsOf(file: string, within: Files = files): Import[] {
  return [...within[file]!.matchAll(IMPORT)].map(([statement, specifier]) => ({
    specifier: specifier!,
    target: specifier!.startsWith(".") ? resolve(within, file, specifier!) : null,
    typeOnly: /^(?:import|export)\s+type\s/.test(statement!),
  }));
}

/** Imports into a folder to the right, or into a sibling route folder: "from → to". */
function layerViolations(within: Files): string[] {
  const violations: string[] = [];
  for (const file of Object.keys(within)) {
    for (const { target } of importsOf(file, within)) {
      if (!target || /\.(client\.js|txt)$/.test(target)) continue;
      const sameUnit = unitOf(target) === unitOf(file);
      if (layerOf(target) > layerOf(file) || (!sameUnit && layerOf(target) === layerOf(file))) {
        violations.push(`${file} → ${target}`);
      }
    }
  }
  return violations;
}

const DEFINES_OBJECT = /\bclass\s+\w+\s+extends\s+DurableObject\b/;
const CALLS_A_STUB = /\.(getByName|idFromName|idFromString|newUniqueId)\(/;

/**
 * objects/ holds only the Durable Objects, their stub clients (`*-client.ts`) and what only they
 * use (their tables, migrations, the retry rule); no Durable Object is defined elsewhere; only
 * objects/ reaches a stub; and outside objects/ (but for the Worker entry, which exports the
 * classes) an object's module is imported for its types only, so every call goes through a client.
 */
function objectsViolations(within: Files): string[] {
  const violations: string[] = [];
  const importers = (target: string) =>
    Object.keys(within).filter((f) => importsOf(f, within).some((i) => i.target === target));
  for (const file of Object.keys(within)) {
    const text = within[file]!;
    const inObjects = file.startsWith("objects/");
    if (!inObjects && DEFINES_OBJECT.test(text))
      violations.push(`${file} defines a Durable Object`);
    if (!inObjects && CALLS_A_STUB.test(text)) violations.push(`${file} calls a stub`);
    if (!inObjects) continue;
    const isObject = DEFINES_OBJECT.test(text);
    const isClient = file.endsWith("-client.ts");
    const usedOutside = importers(file).filter((f) => !f.startsWith("objects/"));
    if (!isObject && !isClient && usedOutside.length > 0)
      violations.push(`${file} is neither an object nor a client, and ${usedOutside[0]} uses it`);
    if (isObject) {
      for (const importer of usedOutside) {
        const values = importsOf(importer, within).some((i) => i.target === file && !i.typeOnly);
        if (values && importer !== "index.ts") violations.push(`${importer} uses ${file} itself`);
      }
    }
  }
  return violations;
}

/** What quota/ must not touch: Hono, bindings, storage. */
function quotaViolations(within: Files): string[] {
  const violations: string[] = [];
  for (const file of Object.keys(within).filter((f) => f.startsWith("quota/"))) {
    for (const { specifier } of importsOf(file, within)) {
      if (/^(hono|@hono|cloudflare:)/.test(specifier))
        violations.push(`${file} imports ${specifier}`);
    }
    if (/\b(DurableObject\w*|D1Database|Env)\b/.test(within[file]!))
      violations.push(`${file} names a binding`);
  }
  return violations;
}

// Made-up layouts, each breaking one rule once (the checks above must find exactly that).
const fixture = (entries: Record<string, string>): Files => entries;
const BROKEN_LAYOUTS: {
  name: string;
  check: (f: Files) => string[];
  files: Files;
  found: string[];
}[] = [
  {
    name: "quota/ importing objects/ and middleware/",
    check: layerViolations,
    files: fixture({
      "quota/rule.ts": 'import { A } from "../objects/a";\nimport { B } from "../middleware/b";\n',
      "objects/a.ts": 'import { rule } from "../quota/rule";\n',
      "middleware/b.ts": 'import { A } from "../objects/a";\n',
    }),
    found: ["quota/rule.ts → objects/a.ts", "quota/rule.ts → middleware/b.ts"],
  },
  {
    name: "a sibling route folder",
    check: layerViolations,
    files: fixture({
      "routes/pets/a.ts": 'import { b } from "../admin/b";\n',
      "routes/admin/b.ts": "export const b = 1;\n",
    }),
    found: ["routes/pets/a.ts → routes/admin/b.ts"],
  },
  {
    name: "a rule in objects/, an object used directly, a stub called outside, an object outside",
    check: objectsViolations,
    files: fixture({
      "objects/thing.ts": "export class Thing extends DurableObject<Env> {}\n",
      "objects/thing-client.ts": 'import type { Thing } from "./thing";\nx.getByName(id);\n',
      "objects/rule.ts": "export const rule = 1;\n",
      "objects/table.ts": "export const table = 1;\n",
      "objects/uses-table.ts": 'import { table } from "./table";\n',
      "middleware/m.ts":
        'import { rule } from "../objects/rule";\nimport { Thing } from "../objects/thing";\n',
      "routes/r.ts": 'import type { Thing } from "../objects/thing";\nenv.X.getByName(id);\n',
      "quota/other.ts": "class Other extends DurableObject {}\n",
      "index.ts": 'export { Thing } from "./objects/thing";\n',
    }),
    found: [
      "objects/rule.ts is neither an object nor a client, and middleware/m.ts uses it",
      "middleware/m.ts uses objects/thing.ts itself",
      "routes/r.ts calls a stub",
      "quota/other.ts defines a Durable Object",
    ],
  },
  {
    name: "quota/ touching Hono or a binding",
    check: quotaViolations,
    files: fixture({
      "quota/a.ts": 'import { Hono } from "hono";\n',
      "quota/b.ts": "export function f(ns: DurableObjectNamespace) {}\n",
      "quota/c.ts": "export const c = 1;\n",
    }),
    found: ["quota/a.ts imports hono", "quota/b.ts names a binding"],
  },
];

describe("src/ layout", () => {
  it("reads every source file, and every file sits in a known layer", () => {
    expect(Object.keys(files).length).toBeGreaterThan(40);
    for (const file of Object.keys(files)) expect(layerOf(file), file).toBeGreaterThanOrEqual(0);
  });

  it.each(BROKEN_LAYOUTS)("each check finds what breaks it: $name", ({ check, files, found }) => {
    expect(check(files).sort()).toEqual([...found].sort());
  });

  it("imports point one way: never into a folder to the right, nor into a sibling route folder", () => {
    for (const file of Object.keys(files)) {
      for (const { specifier, target } of importsOf(file)) {
        if (!target || /\.(client\.js|txt)$/.test(target)) continue;
        expect(files[target], `${file} imports ${specifier}, which does not exist`).toBeDefined();
      }
    }
    expect(layerViolations(files)).toEqual([]);
  });

  it("objects/ holds the Durable Objects and their stub clients, and only they reach a stub", () => {
    expect(Object.keys(files).filter((f) => DEFINES_OBJECT.test(files[f]!)).length).toBeGreaterThan(
      2,
    );
    expect(objectsViolations(files)).toEqual([]);
  });

  it("no cycle between folders", () => {
    const edges = new Map<string, Set<string>>();
    for (const file of Object.keys(files)) {
      for (const { target } of importsOf(file)) {
        if (target && unitOf(target) !== unitOf(file)) {
          const from = edges.get(unitOf(file)) ?? new Set();
          edges.set(unitOf(file), from.add(unitOf(target)));
        }
      }
    }
    const cycles: string[] = [];
    const visit = (unit: string, path: string[]) => {
      if (path.includes(unit)) return void cycles.push([...path, unit].join(" → "));
      for (const next of edges.get(unit) ?? []) visit(next, [...path, unit]);
    };
    for (const unit of edges.keys()) visit(unit, []);
    expect(cycles).toEqual([]);
  });

  it("quota/ holds the rules and the lease holder: no Hono, no bindings, no storage", () => {
    expect(Object.keys(files).filter((f) => f.startsWith("quota/")).length).toBeGreaterThan(5);
    expect(quotaViolations(files)).toEqual([]);
  });

  it("SQL lives only in db/ and objects/", () => {
    const SQL =
      /\b(SELECT\s[\s\S]*?\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b/;
    const outside = Object.keys(files).filter(
      (f) => SQL.test(files[f]!) && !f.startsWith("db/") && !f.startsWith("objects/"),
    );
    expect(outside).toEqual([]);
  });

  it("pets are only ever inserted: no SQL in src/ updates or deletes them (the page cache relies on it)", () => {
    // Any statement that could change or remove a stored pet. `INSERT … ON CONFLICT … DO UPDATE`
    // and `REPLACE` overwrite rows too.
    const CHANGES_PETS =
      /\b(UPDATE\s+(OR\s+\w+\s+)?pets\b|DELETE\s+FROM\s+pets\b|REPLACE\s+INTO\s+pets\b|INSERT\s+OR\s+REPLACE\s+INTO\s+pets\b|DROP\s+TABLE\s+(IF\s+EXISTS\s+)?pets\b|ALTER\s+TABLE\s+pets\b|INSERT\s+INTO\s+pets\b[^;`"]*?DO\s+UPDATE)/i;
    // The guard itself must catch each form (and not flag an ordinary insert or read).
    for (const sql of [
      "UPDATE pets SET idempotency_ref = NULL",
      "update  pets set name = ?",
      "UPDATE OR IGNORE pets SET status = 'sold'",
      "DELETE FROM pets WHERE id = 1",
      "REPLACE INTO pets (id, name) VALUES (1, 'x')",
      "INSERT OR REPLACE INTO pets (id) VALUES (1)",
      "INSERT INTO pets (id, name) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET name = excluded.name",
      "DROP TABLE IF EXISTS pets",
    ])
      expect(CHANGES_PETS.test(sql), sql).toBe(true);
    for (const sql of [
      "INSERT INTO pets (name) VALUES (?1) RETURNING id",
      "SELECT id FROM pets WHERE id = ?1",
      "DELETE FROM idempotency_records WHERE key_id = ?1",
      "UPDATE petsitters SET x = 1",
    ])
      expect(CHANGES_PETS.test(sql), sql).toBe(false);
    const offenders = Object.keys(files).filter((f) => CHANGES_PETS.test(files[f]!));
    expect(offenders).toEqual([]);
  });
});
