import { ObjectCannotOpenError } from "./stub-call";

/**
 * Versioned SQLite schemas for Durable Objects, changed expand-then-contract so that the release
 * before still opens an object this one opened: the contract list raises `schema_version`, the
 * additions leave it alone (docs/architecture.md, "Where a change goes").
 */
export interface ObjectSchema {
  /** The contract migrations, oldest first; their count is the version this release writes. */
  contract: readonly string[];
  /** The newest stored contract version this code opens: its own, or a later one it reads. */
  readsThrough: number;
  /** Additive steps, applied once each in order after the contract; old code ignores them. */
  additions: readonly SchemaAddition[];
}

/**
 * `name`: recorded in `schema_additions` once applied; unique within the object, never reused.
 * `sql`: CREATE TABLE / INDEX IF NOT EXISTS, or ADD COLUMN (NULL-able or with a DEFAULT).
 */
export type SchemaAddition = { name: string; sql: string };

/** Brings `storage` to `schema` in one transaction; past `readsThrough`, ObjectCannotOpenError. */
export function migrateSchemaOrThrow(storage: DurableObjectStorage, schema: ObjectSchema): void {
  const { sql } = storage;
  const { contract, readsThrough, additions } = schema;
  storage.transactionSync(() => {
    sql.exec(`CREATE TABLE IF NOT EXISTS schema_version (
      id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL) STRICT`);
    const current = schemaVersion(sql);
    if (current > readsThrough) {
      throw new ObjectCannotOpenError(
        `its stored schema version ${current} is newer than this code reads (${readsThrough})`,
      );
    }
    if (current < contract.length) {
      for (const migration of contract.slice(current)) sql.exec(migration);
      sql.exec(
        `INSERT INTO schema_version (id, version) VALUES (1, ?)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version`,
        contract.length,
      );
    }
    if (additions.length === 0) return;
    sql.exec("CREATE TABLE IF NOT EXISTS schema_additions (name TEXT PRIMARY KEY) STRICT");
    const applied = new Set(appliedAdditions(sql));
    for (const addition of additions) {
      if (applied.has(addition.name)) continue;
      sql.exec(addition.sql);
      sql.exec("INSERT INTO schema_additions (name) VALUES (?)", addition.name);
    }
  });
}

/** The contract version an object has stored (0 before its first migration). */
export function schemaVersion(sql: SqlStorage): number {
  if (!hasTable(sql, "schema_version")) return 0;
  return (
    sql.exec<{ version: number }>("SELECT version FROM schema_version").toArray()[0]?.version ?? 0
  );
}

/** The names of the additions an object has applied (by any release), in no set order. */
export function appliedAdditions(sql: SqlStorage): string[] {
  if (!hasTable(sql, "schema_additions")) return [];
  return sql
    .exec<{ name: string }>("SELECT name FROM schema_additions")
    .toArray()
    .map((row) => row.name);
}

const hasTable = (sql: SqlStorage, name: string): boolean =>
  sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name).toArray().length >
  0;
