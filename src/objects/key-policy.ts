import type { Policy } from "../quota/windows";

/** The newest policy (limits, revocation) the key's object was pushed or shown, never older. */
export class KeyPolicy {
  #current: Policy | null = null;

  constructor(private readonly sql: SqlStorage) {}

  /** The stored policy (null: none known yet). */
  get current(): Policy | null {
    return this.#current;
  }

  /** Reads the stored policy, as the object opens. */
  load(): void {
    const row = this.sql
      .exec<{ perMinute: number; perDay: number; version: number; revoked: number }>(
        "SELECT per_minute AS perMinute, per_day AS perDay, version, revoked FROM policy WHERE id = 1",
      )
      .toArray()[0];
    this.#current = row ? { ...row, revoked: row.revoked === 1 } : null;
  }

  /** The policy that applies: `offered` stored if it is newer than the stored one. */
  adopt(offered: Policy): Policy {
    if (this.#current && this.#current.version >= offered.version) return this.#current;
    this.#current = offered;
    this.sql.exec(
      `INSERT INTO policy (id, per_minute, per_day, version, revoked) VALUES (1, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET per_minute = excluded.per_minute, per_day = excluded.per_day,
         version = excluded.version, revoked = excluded.revoked`,
      offered.perMinute,
      offered.perDay,
      offered.version,
      offered.revoked ? 1 : 0,
    );
    return offered;
  }

  /** The newer of the stored policy and `offered` (the key as D1 has it), storing nothing. */
  newest(offered?: Policy): Policy | null {
    const current = this.#current;
    return current && (!offered || current.version >= offered.version)
      ? current
      : (offered ?? null);
  }
}
