/**
 * Versioned SQLite schemas for Durable Objects ("Rules of Durable Objects"): each object lists
 * its migrations in order, and on start applies those past the version it has stored, in one
 * transaction. Migrations are append-only: to add a column later, append an ALTER TABLE.
 */
export function migrateSchema(storage: DurableObjectStorage, migrations: readonly string[]): void {
  const { sql } = storage;
  storage.transactionSync(() => {
    sql.exec(`CREATE TABLE IF NOT EXISTS schema_version (
      id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL) STRICT`);
    const stored = sql.exec<{ version: number }>("SELECT version FROM schema_version").toArray()[0];
    const current = stored?.version ?? 0;
    if (current > migrations.length) {
      throw new Error(`schema version ${current} is newer than this code (${migrations.length})`);
    }
    for (const migration of migrations.slice(current)) sql.exec(migration);
    if (current < migrations.length) {
      sql.exec(
        `INSERT INTO schema_version (id, version) VALUES (1, ?)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version`,
        migrations.length,
      );
    }
  });
}

/** The schema version an object has stored (0 before its first migration). */
export function schemaVersion(sql: SqlStorage): number {
  const tables = sql.exec("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").toArray();
  if (!tables.length) return 0;
  return (
    sql.exec<{ version: number }>("SELECT version FROM schema_version").toArray()[0]?.version ?? 0
  );
}
