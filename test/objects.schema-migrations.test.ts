import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { AUTH_SHIELD_MIGRATIONS } from "../src/objects/auth-shield";
import { QUOTA_LIMITER_MIGRATIONS } from "../src/objects/quota-limiter-schema";
import { migrateSchema, schemaVersion } from "../src/objects/schema-migrations";
import { mockClock, T0 } from "./helpers";

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
    await stub.recordFailure();
    const version = await runInDurableObject(stub, (_, state) => schemaVersion(state.storage.sql));
    expect(version).toBe(AUTH_SHIELD_MIGRATIONS.length);
  });

  it("a later migration adds a column without losing rows, and runs once", async () => {
    const stub = env.QUOTA.getByName(`schema-next-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      const next = [...QUOTA_LIMITER_MIGRATIONS, "ALTER TABLE usage ADD COLUMN note TEXT"];
      migrateSchema(state.storage, next);
      migrateSchema(state.storage, next); // a second start must not re-run the ALTER
      expect(schemaVersion(state.storage.sql)).toBe(next.length);
      const row = state.storage.sql.exec("SELECT minute_count, note FROM usage").one();
      expect(row).toEqual({ minute_count: 1, note: null });
    });
  });

  it("refuses to run older code against a newer schema rather than misread it", async () => {
    const stub = env.QUOTA.getByName(`schema-newer-${++seq}`);
    await stub.admit(POLICY);
    await runInDurableObject(stub, (_, state) => {
      expect(() => migrateSchema(state.storage, QUOTA_LIMITER_MIGRATIONS.slice(0, 0))).toThrow(
        /newer than this code/,
      );
    });
  });
});
