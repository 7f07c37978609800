// A rollback must leave every Durable Object working: the previous release (its migration lists
// and the statements its objects run, kept as fixtures in test/fixtures/previous-release/) opens
// storage this release has migrated and runs its statements on it; and this release opens storage
// the previous release wrote, keeping its data. See docs/architecture.md ("Where a change goes").
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { AUTH_SHIELD_SCHEMA } from "../src/objects/auth-shield";
import { OBJECT_SCHEMAS } from "../src/objects/object-schemas";
import { QUOTA_LIMITER_SCHEMA } from "../src/objects/quota-limiter-schema";
import {
  appliedAdditions,
  migrateSchemaOrThrow,
  type ObjectSchema,
  schemaVersion,
} from "../src/objects/schema-migrations";
import { newAdmissionId } from "../src/quota/lease-messages";
import {
  EXEC_SITES,
  PREVIOUS_QUERIES,
  type PreviousQuery,
  RECALLED_ADMISSION_FIELDS,
  RECALLED_WINDOW_FIELDS,
} from "./fixtures/previous-release/queries";
import {
  PREVIOUS_OBJECT_SCHEMAS,
  PREVIOUS_RELEASE,
  migrateSchemaOrThrow as previousMigrateSchemaOrThrow,
} from "./fixtures/previous-release/schemas";
import { mockClock, T0 } from "./helpers";

const time = mockClock(T0);
const POLICY = { perMinute: 50, perDay: 1_000, version: 1, revoked: false };
let seq = 0;

interface Case {
  object: keyof typeof OBJECT_SCHEMAS;
  schema: ObjectSchema;
  /** The previous release's schema of the object, which its constructor opens it with. */
  previous: ObjectSchema;
  /** Every statement the previous release's object runs, in an order that leaves rows to read. */
  statements: readonly PreviousQuery[];
  stub: (name: string) => DurableObjectStub;
  /** Uses a fresh object of this release so that every table it keeps holds rows. */
  use: (name: string) => Promise<void>;
  /** Reads, through this release's object, the minute count it keeps. */
  minuteCount: (name: string) => Promise<number>;
}

const CASES: Case[] = [
  {
    object: "QuotaLimiter",
    schema: QUOTA_LIMITER_SCHEMA,
    previous: PREVIOUS_OBJECT_SCHEMAS.QuotaLimiter,
    statements: PREVIOUS_QUERIES.QuotaLimiter,
    stub: (name) => env.QUOTA.getByName(name),
    use: async (name) => {
      const stub = env.QUOTA.getByName(name);
      await stub.admit(POLICY);
      // A lease granted to a location holder: a row in leases with every column set.
      const { lease } = await stub.admit(POLICY, { want: 4, returning: [] }, `${name}@LHR`);
      expect(lease).not.toBeNull();
      await stub.saveUsageHistory();
    },
    minuteCount: async (name) => (await env.QUOTA.getByName(name).usage(POLICY)).minute.count,
  },
  {
    object: "AuthShield",
    schema: AUTH_SHIELD_SCHEMA,
    previous: PREVIOUS_OBJECT_SCHEMAS.AuthShield,
    statements: PREVIOUS_QUERIES.AuthShield,
    stub: (name) => env.AUTH_SHIELD.getByName(name),
    use: async (name) => {
      await env.AUTH_SHIELD.getByName(name).countRequest(30);
    },
    // One more counted request shows the count it kept (remaining = limit - count).
    minuteCount: async (name) => {
      const decision = await env.AUTH_SHIELD.getByName(name).countRequest(30);
      return 30 - decision.windows[0]!.remaining - 1;
    },
  },
];

/** The tables an object keeps (not the runtime's own). */
const tablesOf = (sql: SqlStorage): string[] =>
  sql
    .exec<{ name: string }>(
      `SELECT name FROM sqlite_master WHERE type = 'table'
         AND substr(name, 1, 4) != '_cf_' AND substr(name, 1, 7) != 'sqlite_' ORDER BY name`,
    )
    .toArray()
    .map((row) => row.name);

/** Runs each statement as the previous release does; names the one that fails. */
function runPrevious(sql: SqlStorage, statements: readonly PreviousQuery[]): void {
  for (const { at, sql: text, params } of statements) {
    try {
      sql.exec(text, ...params).toArray();
    } catch (err) {
      throw new Error(`${PREVIOUS_RELEASE.slice(0, 7)}'s ${at} fails: ${String(err)}`);
    }
  }
}

/** Additions of every kind the rule allows, on every table the object keeps. */
function probeAdditions(sql: SqlStorage): ObjectSchema["additions"] {
  return [
    ...tablesOf(sql)
      .filter((t) => t !== "schema_version" && t !== "schema_additions")
      .flatMap((t) => [
        { name: `probe_${t}_nullable`, sql: `ALTER TABLE ${t} ADD COLUMN probe_note TEXT` },
        {
          name: `probe_${t}_defaulted`,
          sql: `ALTER TABLE ${t} ADD COLUMN probe_count INTEGER NOT NULL DEFAULT 0`,
        },
      ]),
    {
      name: "probe_table",
      sql: `CREATE TABLE IF NOT EXISTS probe (id TEXT PRIMARY KEY, at INTEGER NOT NULL) STRICT;
        CREATE INDEX IF NOT EXISTS probe_at ON probe (at)`,
    },
  ];
}

describe(`the previous release's fixtures (${PREVIOUS_RELEASE.slice(0, 7)})`, () => {
  it("hold a statement for every line of its objects that runs SQL (EXEC_SITES)", () => {
    const held = new Set(Object.values(PREVIOUS_QUERIES).flatMap((qs) => qs.map((q) => q.site)));
    const listed = Object.entries(EXEC_SITES).flatMap(([file, lines]) =>
      lines.map((line) => `${file}:${line}`),
    );
    expect([...held].sort()).toEqual(listed.sort());
  });

  it("give every object class it keeps SQLite storage for a case here", () => {
    expect(CASES.map((c) => c.object).sort()).toEqual(Object.keys(PREVIOUS_OBJECT_SCHEMAS).sort());
    expect(Object.keys(PREVIOUS_QUERIES).sort()).toEqual(
      Object.keys(PREVIOUS_OBJECT_SCHEMAS).sort(),
    );
  });
});

describe.each(CASES)("$object across a rollback to the previous release", (c) => {
  it("stores no contract version the previous release cannot open, and keeps its migrations as shipped", () => {
    expect(OBJECT_SCHEMAS[c.object]).toEqual({
      writes: c.schema.contract.length,
      readsThrough: c.schema.readsThrough,
    });
    expect(c.schema.readsThrough).toBeGreaterThanOrEqual(c.schema.contract.length);
    // What the previous release reads through bounds what this release may write.
    expect(OBJECT_SCHEMAS[c.object].writes).toBeLessThanOrEqual(c.previous.readsThrough);
    expect(c.schema.contract.slice(0, c.previous.contract.length)).toEqual(c.previous.contract);
    // Its additions stay, as shipped and in their order: never removed or edited.
    expect(c.schema.additions.slice(0, c.previous.additions.length)).toEqual(c.previous.additions);
    const names = c.schema.additions.map((a) => a.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it("the previous release opens storage this release migrated and used, and runs its statements on it", async () => {
    const name = `compat-${c.object}-${++seq}`;
    await c.use(name);
    await runInDurableObject(c.stub(name), (_, state) => {
      const { sql } = state.storage;
      expect(appliedAdditions(sql).sort()).toEqual(c.schema.additions.map((a) => a.name).sort());
      const tables = tablesOf(sql);
      previousMigrateSchemaOrThrow(state.storage, c.previous); // its constructor: must not throw
      expect(schemaVersion(sql)).toBe(OBJECT_SCHEMAS[c.object].writes);
      expect(tablesOf(sql)).toEqual(tables); // no migration or addition of its ran again
      runPrevious(sql, c.statements);
    });
  });

  it("the previous release ignores additions of every allowed kind; a contract step instead would lock it out", async () => {
    const name = `compat-probe-${c.object}-${++seq}`;
    await c.use(name);
    await runInDurableObject(c.stub(name), (_, state) => {
      const { sql } = state.storage;
      const additions = [...c.schema.additions, ...probeAdditions(sql)];
      migrateSchemaOrThrow(state.storage, { ...c.schema, additions });
      previousMigrateSchemaOrThrow(state.storage, c.previous);
      runPrevious(sql, c.statements);
      // The same change appended to the contract list raises the stored version past it.
      const bumped = [...c.schema.contract, "CREATE TABLE IF NOT EXISTS probe2 (id TEXT) STRICT"];
      migrateSchemaOrThrow(state.storage, {
        ...c.schema,
        contract: bumped,
        readsThrough: bumped.length,
      });
      expect(() => previousMigrateSchemaOrThrow(state.storage, c.previous)).toThrow(
        /newer than this code reads/,
      );
    });
  });

  it("this release opens storage the previous release wrote, keeps its data, and counts on from it", async () => {
    const name = `compat-back-${c.object}-${++seq}`;
    await c.use(name);
    const minuteStart = T0 - (T0 % MINUTE_MS);
    await runInDurableObject(c.stub(name), (_, state) => {
      const { sql } = state.storage;
      // Back to what the previous release alone made of it: its schema and its rows.
      for (const table of tablesOf(sql)) sql.exec(`DROP TABLE ${table}`);
      previousMigrateSchemaOrThrow(state.storage, c.previous);
      const save = c.statements.find((s) => s.at === "UsageTable.save")!;
      sql.exec(save.sql, minuteStart, 7, 0, T0 - (T0 % DAY_MS), 9, 0);
    });
    await evictDurableObject(c.stub(name));
    expect(await c.minuteCount(name)).toBe(7);
    time.now = T0 + 1_000;
    await c.use(name);
    await runInDurableObject(c.stub(name), (_, state) => {
      expect(schemaVersion(state.storage.sql)).toBe(OBJECT_SCHEMAS[c.object].writes);
      expect(appliedAdditions(state.storage.sql).sort()).toEqual(
        c.schema.additions.map((a) => a.name).sort(),
      );
    });
    time.now = T0;
  });
});

describe("QuotaLimiter's remembered answers across a rollback", () => {
  it("the previous release recalls the answer this release gave an admission id, with every field it reads", async () => {
    const stub = env.QUOTA.getByName(`compat-recall-${++seq}`);
    const admissionId = newAdmissionId(time.now);
    const request = { want: 4, returning: [], admissionId };
    const answered = await stub.admit(POLICY, request, "key@LHR");
    expect(answered.lease).not.toBeNull();
    await runInDurableObject(stub, (_, state) => {
      previousMigrateSchemaOrThrow(state.storage, PREVIOUS_OBJECT_SCHEMAS.QuotaLimiter);
      const recall = PREVIOUS_QUERIES.QuotaLimiter.find((q) => q.at === "AdmissionMemory.recall")!;
      const rows = state.storage.sql.exec<{ answer: string }>(recall.sql, admissionId).toArray();
      expect(rows).toHaveLength(1);
      const recalled = JSON.parse(rows[0]!.answer) as Record<string, unknown>;
      for (const field of RECALLED_ADMISSION_FIELDS) expect(recalled).toHaveProperty(field);
      const windows = recalled.windows as Record<string, unknown>[];
      expect(windows.length).toBeGreaterThan(0);
      for (const w of windows)
        for (const field of RECALLED_WINDOW_FIELDS) expect(w).toHaveProperty(field);
      // It answers the call asked again as this release did.
      expect(recalled).toMatchObject({
        outcome: answered.outcome,
        windows: answered.windows,
        policyVersion: answered.policyVersion,
        lease: answered.lease,
      });
    });
  });
});
