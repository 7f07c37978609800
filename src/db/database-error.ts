/** Any failure of the D1 binding. Mapped to 503 so clients retry instead of treating it as a bug. */
export class DatabaseError extends Error {
  constructor(override readonly cause: unknown) {
    super("D1 query failed");
  }
}

/**
 * Runs a D1 call, turning what the binding throws into a DatabaseError (503, retry). A broken
 * constraint is not an outage but a bug in validation, so it stays an ordinary error (500).
 */
export async function guarded<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (/constraint failed|SQLITE_CONSTRAINT/i.test(String(err))) throw err;
    throw new DatabaseError(err);
  }
}

/** What the data layer needs from D1: a database or a Sessions API session (read replicas). */
export type Queryable = Pick<D1Database, "prepare" | "batch">;
