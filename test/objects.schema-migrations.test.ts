import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { AUTH_SHIELD_MIGRATIONS, AuthShield } from "../src/objects/auth-shield";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import {
  QUOTA_LIMITER_MIGRATIONS,
  QUOTA_LIMITER_SCHEMA,
} from "../src/objects/quota-limiter-schema";
import {
  appliedAdditions,
  migrateSchemaOrThrow,
  type ObjectSchema,
  schemaVersion,
} from "../src/objects/schema-migrations";
import { ObjectCannotOpenError } from "../src/objects/stub-call";
import { mockClock, T0 } from "./helpers";

/** A schema of contract migrations alone, reading no later version than its own. */
const contractOnly = (migrations: readonly string[]): ObjectSchema => ({
  contract: migrations,
  readsThrough: migrations.length,
  additions: [],
});

const POLICY = { perMinute: 50, perDay: 1_000, version: 1, revoked: false };
mockClock(T0);
let seq = 0;

describe("Durable Object storage schemas", () => {
  it("a new QuotaLimiter is at the latest schema version", async () => {
    const stub = env.QUOTA.getByName(`schema-new-${++seq}`);
    await stub.admit(POLICY);
    const version = await runInDurableObject(stub, (_, state) => schemaVersion(state.storage.sql));
    expect(version).toBe(QUOTA_LIMITER_MIGRATIONS.length);
  });

  it("an object created before schemas were versioned keeps its data and is migrated on start", async () => {
    const stub = env.QUOTA.getByName(`schema-old-${++seq}`);
    for (let i = 0; i < 3; i++) await stub.admit(POLICY);
    // Make it what an object of the old code looked like: the tables and rows, no version table.
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("DROP TABLE schema_version");
      expect(schemaVersion(state.storage.sql)).toBe(0);
    });
    await evictDurableObject(stub);
    const decision = await stub.admit(POLICY);
    expect(decision.outcome).toBe("allowed");
    expect(decision.windows.find((w) => w.name === "minute")?.remaining).toBe(50 - 4);
    const version = await runInDurableObject(stub, (_, state) => schemaVersion(state.storage.sql));
    expect(version).toBe(QUOTA_LIMITER_MIGRATIONS.length);
  });

  it("an AuthShield is versioned the same way", async () => {
    const stub = env.AUTH_SHIELD.getByName(`schema-shield-${++seq}`);
    await stub.countRequest(30);
    const version = await runInDurableObject(stub, (_, state) => schemaVersion(state.storage.sql));
    expect(version).toBe(AUTH_SHIELD_MIGRATIONS.length);
  });

  it("a later migration adds a column without losing rows, and runs once", async () => {
    const stub = env.QUOTA.getByName(`schema-next-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      const next = [...QUOTA_LIMITER_MIGRATIONS, "ALTER TABLE usage ADD COLUMN note TEXT"];
      migrateSchemaOrThrow(state.storage, contractOnly(next));
      migrateSchemaOrThrow(state.storage, contractOnly(next)); // a second start must not re-run the ALTER
      expect(schemaVersion(state.storage.sql)).toBe(next.length);
      const row = state.storage.sql.exec("SELECT minute_count, note FROM usage").one();
      expect(row).toEqual({ minute_count: 1, note: null });
    });
  });

  it("refuses to run older code against a newer schema rather than misread it", async () => {
    const stub = env.QUOTA.getByName(`schema-newer-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      const older = contractOnly(QUOTA_LIMITER_MIGRATIONS.slice(0, 0));
      expect(() => migrateSchemaOrThrow(state.storage, older)).toThrow(/newer than this code/);
    });
  });
});

describe("expand-then-contract: additions and the versions a release reads", () => {
  const base: ObjectSchema = {
    contract: QUOTA_LIMITER_MIGRATIONS,
    readsThrough: QUOTA_LIMITER_MIGRATIONS.length,
    additions: [],
  };
  /** The additions the object itself applied when it opened (this release's own). */
  const OWN = QUOTA_LIMITER_SCHEMA.additions.map((addition) => addition.name);
  const NOTE = { name: "usage_note", sql: "ALTER TABLE usage ADD COLUMN note TEXT" };
  const EXTRA = {
    name: "extra_table",
    sql: "CREATE TABLE IF NOT EXISTS extra (id TEXT PRIMARY KEY, at INTEGER NOT NULL) STRICT",
  };

  it("applies each addition once, records it by name, and leaves the contract version alone", async () => {
    const stub = env.QUOTA.getByName(`schema-add-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      const schema = { ...base, additions: [NOTE, EXTRA] };
      migrateSchemaOrThrow(state.storage, schema);
      migrateSchemaOrThrow(state.storage, schema); // a second start must not re-run the ALTER
      expect(schemaVersion(state.storage.sql)).toBe(QUOTA_LIMITER_MIGRATIONS.length);
      expect(appliedAdditions(state.storage.sql).sort()).toEqual(
        [...OWN, "extra_table", "usage_note"].sort(),
      );
      const row = state.storage.sql.exec("SELECT minute_count, note FROM usage").one();
      expect(row).toEqual({ minute_count: 1, note: null });
      state.storage.sql.exec("INSERT INTO extra (id, at) VALUES ('a', 1)");
    });
  });

  it("a new object gets the contract and then every addition", async () => {
    const stub = env.AUTH_SHIELD.getByName(`schema-add-new-${++seq}`);
    await stub.countRequest(30);
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("DROP TABLE usage; DROP TABLE schema_version");
      migrateSchemaOrThrow(state.storage, {
        contract: AUTH_SHIELD_MIGRATIONS,
        readsThrough: AUTH_SHIELD_MIGRATIONS.length,
        additions: [{ name: "shield_note", sql: "ALTER TABLE usage ADD COLUMN note TEXT" }],
      });
      expect(schemaVersion(state.storage.sql)).toBe(AUTH_SHIELD_MIGRATIONS.length);
      expect(appliedAdditions(state.storage.sql)).toEqual(["shield_note"]);
    });
  });

  it("leaves alone additions a later release applied that this code does not know", async () => {
    const stub = env.QUOTA.getByName(`schema-add-later-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      migrateSchemaOrThrow(state.storage, { ...base, additions: [NOTE, EXTRA] });
      migrateSchemaOrThrow(state.storage, { ...base, additions: [NOTE] }); // the release before
      expect(appliedAdditions(state.storage.sql).sort()).toEqual(
        [...OWN, "extra_table", "usage_note"].sort(),
      );
      expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM extra").one()).toEqual({ n: 0 });
    });
  });

  it("opens a later contract version it has learnt to read without migrating or lowering it", async () => {
    const stub = env.QUOTA.getByName(`schema-reads-later-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      const later = QUOTA_LIMITER_MIGRATIONS.length + 1;
      state.storage.sql.exec("UPDATE schema_version SET version = ?", later);
      migrateSchemaOrThrow(state.storage, { ...base, readsThrough: later });
      expect(schemaVersion(state.storage.sql)).toBe(later);
    });
  });

  it("refuses a contract version past the one it reads through, as an object that cannot open, changing nothing", async () => {
    const stub = env.QUOTA.getByName(`schema-too-new-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      const later = QUOTA_LIMITER_MIGRATIONS.length + 1;
      state.storage.sql.exec("UPDATE schema_version SET version = ?", later);
      expect(() => migrateSchemaOrThrow(state.storage, { ...base, additions: [NOTE] })).toThrow(
        ObjectCannotOpenError,
      );
      expect(schemaVersion(state.storage.sql)).toBe(later);
      expect(appliedAdditions(state.storage.sql)).toEqual(OWN);
    });
  });
});

describe("an object that cannot open says so, whatever failed", () => {
  /** What the object's constructor left to run under blockConcurrencyWhile, run on `state`. */
  async function opening(
    make: (ctx: DurableObjectState) => unknown,
    state: DurableObjectState,
  ): Promise<unknown> {
    let open: Promise<unknown> = Promise.resolve();
    Object.defineProperty(state, "blockConcurrencyWhile", {
      configurable: true,
      value: (fn: () => Promise<unknown>) => {
        open = fn();
        return open;
      },
    });
    try {
      make(state);
    } finally {
      delete (state as { blockConcurrencyWhile?: unknown }).blockConcurrencyWhile;
    }
    return open;
  }

  it("a QuotaLimiter whose settings are bad (its constructor's work throws)", async () => {
    const stub = env.QUOTA.getByName(`schema-bad-config-${++seq}`);
    await stub.admit(POLICY);
    const failure = await runInDurableObject(stub, (_, state) =>
      opening((ctx) => new QuotaLimiter(ctx, { ...env, BAN_MINUTES: "soon" }), state).then(
        () => null,
        (err: unknown) => err,
      ),
    );
    expect(failure).toBeInstanceOf(ObjectCannotOpenError);
    expect(String((failure as Error).message)).toMatch(/^object cannot open: .*BAN_MINUTES/);
  });

  it.each([
    ["QuotaLimiter", (ctx: DurableObjectState) => new QuotaLimiter(ctx, env)],
    ["AuthShield", (ctx: DurableObjectState) => new AuthShield(ctx, env)],
  ])("a %s whose stored schema is newer than its code reads", async (_, make) => {
    const stub = env.QUOTA.getByName(`schema-too-new-open-${++seq}`);
    await stub.admit(POLICY);
    const failure = await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("UPDATE schema_version SET version = 99");
      return opening(make, state).then(
        () => null,
        (err: unknown) => err,
      );
    });
    expect(failure).toBeInstanceOf(ObjectCannotOpenError);
    expect(String((failure as Error).message)).toContain("newer than this code reads");
  });
});
