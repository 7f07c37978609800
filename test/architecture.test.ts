/// <reference types="vite/client" />
/**
 * The layout rule, enforced: each folder of src/ has one job, and imports point one way:
 *
 *   lib ← quota ← schemas ← db ← objects ← auth ← middleware ← routes ← app (src/*.ts)
 *
 * A file may import from its own folder and from folders to its left, never to its right, and
 * sibling route folders (routes/pets, routes/admin) do not import each other.
 */
import { describe, expect, it } from "vitest";

const LAYERS = ["lib", "quota", "schemas", "db", "objects", "auth", "middleware", "routes", "app"];

// Read at transform time by Vite: the source text of every module in src/.
const sources = import.meta.glob<string>("../src/**/*.{ts,tsx}", {
  query: "?raw",
  import: "default",
  eager: true,
});
const files = Object.fromEntries(
  Object.entries(sources).map(([path, text]) => [path.replace("../src/", ""), text]),
);

/** "routes/pets/routes.ts" → "routes/pets"; "auth/api-key.ts" → "auth"; "app.ts" → "app". */
function unitOf(file: string): string {
  const parts = file.split("/");
  if (parts.length === 1) return "app";
  return parts[0] === "routes" && parts.length > 2 ? `routes/${parts[1]}` : parts[0]!;
}
const layerOf = (file: string) => LAYERS.indexOf(unitOf(file).split("/")[0]!);

function resolve(from: string, specifier: string): string {
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

function importsOf(file: string): { specifier: string; target: string | null }[] {
  return [...files[file]!.matchAll(IMPORT)].map(([, specifier]) => ({
    specifier: specifier!,
    target: specifier!.startsWith(".") ? resolve(file, specifier!) : null,
  }));
}

describe("src/ layout", () => {
  it("reads every source file, and every file sits in a known layer", () => {
    expect(Object.keys(files).length).toBeGreaterThan(40);
    for (const file of Object.keys(files)) expect(layerOf(file), file).toBeGreaterThanOrEqual(0);
  });

  it("imports point one way: never into a folder to the right, nor into a sibling route folder", () => {
    const violations: string[] = [];
    for (const file of Object.keys(files)) {
      for (const { specifier, target } of importsOf(file)) {
        if (!target || /\.(client\.js|txt)$/.test(target)) continue;
        expect(files[target], `${file} imports ${specifier}, which does not exist`).toBeDefined();
        const sameUnit = unitOf(target) === unitOf(file);
        if (layerOf(target) > layerOf(file) || (!sameUnit && layerOf(target) === layerOf(file))) {
          violations.push(`${file} → ${target}`);
        }
      }
    }
    expect(violations).toEqual([]);
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

  it("quota/ holds pure rules: no Hono, no bindings, no storage", () => {
    for (const file of Object.keys(files).filter((f) => f.startsWith("quota/"))) {
      for (const { specifier } of importsOf(file)) {
        expect(specifier, file).not.toMatch(/^(hono|@hono|cloudflare:)/);
      }
    }
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
