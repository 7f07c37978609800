import { AUTH_SHIELD_SCHEMA } from "./auth-shield";
import { QUOTA_LIMITER_SCHEMA } from "./quota-limiter-schema";
import type { ObjectSchema } from "./schema-migrations";

/**
 * What this release writes (the contract version) and reads through of each object's stored
 * schema, for compat/release.json: a rollback from C to T needs `C.writes <= T.readsThrough`.
 */
export type ObjectSchemaRecord = { writes: number; readsThrough: number };

const recordOf = (schema: ObjectSchema): ObjectSchemaRecord => ({
  writes: schema.contract.length,
  readsThrough: schema.readsThrough,
});

/** Per Durable Object class; QuotaHolder keeps nothing in storage (0: no schema). */
export const OBJECT_SCHEMAS = {
  QuotaLimiter: recordOf(QUOTA_LIMITER_SCHEMA),
  AuthShield: recordOf(AUTH_SHIELD_SCHEMA),
  QuotaHolder: { writes: 0, readsThrough: 0 },
} as const satisfies Record<string, ObjectSchemaRecord>;
