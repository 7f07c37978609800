import type { NewPet, Pet, PetStatus } from "../schemas/pets";
import { guarded, type Queryable } from "./database-error";

// Columns are aliased to the API's field names so rows need no mapping.
const PET_COLUMNS = "id, name, category_id AS categoryId, status";

export interface ListPetsOptions {
  limit: number;
  status?: PetStatus;
  /** Keyset pagination: only pets with a larger id. */
  afterId?: number;
}

export function listPets(
  db: Queryable,
  { limit, status, afterId = 0 }: ListPetsOptions,
): Promise<Pet[]> {
  return guarded(async () => {
    const stmt = status
      ? db
          .prepare(
            `SELECT ${PET_COLUMNS} FROM pets WHERE status = ?1 AND id > ?2 ORDER BY id LIMIT ?3`,
          )
          .bind(status, afterId, limit)
      : db
          .prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id > ?1 ORDER BY id LIMIT ?2`)
          .bind(afterId, limit);
    return (await stmt.all<Pet>()).results;
  });
}

export function createPet(db: Queryable, pet: NewPet): Promise<Pet> {
  return guarded(async () => {
    const row = await db
      .prepare(
        `INSERT INTO pets (name, category_id, status) VALUES (?1, ?2, ?3) RETURNING ${PET_COLUMNS}`,
      )
      .bind(pet.name, pet.categoryId, pet.status)
      .first<Pet>();
    if (!row) throw new Error("INSERT … RETURNING returned no row");
    return row;
  });
}

/** What identifies an idempotent create, and how long its record lasts. */
export interface IdempotencyRecordKey {
  /** The API key the Idempotency-Key belongs to (keys are scoped per API key). */
  keyId: string;
  /** SHA-256 (hex) of the Idempotency-Key. */
  idemKeyHash: string;
  /** SHA-256 (hex) of the validated request; another body under the same key is refused. */
  fingerprint: string;
  now: number;
  /** How long the record answers retries; after that the next request replaces it. */
  ttlMs: number;
}

export type IdempotentCreate =
  | { outcome: "created"; pet: Pet }
  | { outcome: "replayed"; pet: Pet }
  | { outcome: "key_reused" };

type RecordRow = Pet & { fingerprint: string };

// Expired records deleted by each idempotent create, oldest first: more than the one it adds, so
// the table stays about one day of creates deep without a scheduled job.
const EXPIRED_RECORDS_SWEPT_PER_CREATE = 8;

/**
 * Creates a pet under an idempotency record, or finds the record a previous request left: one D1
 * batch, which D1 runs as one transaction, so the pet and its record are written together or not
 * at all (no claim can be left behind) and concurrent requests with the same key serialize. Pets
 * are only ever inserted here: a replay reads the pet the record names.
 */
export function createPetIdempotently(
  db: Queryable,
  pet: NewPet,
  record: IdempotencyRecordKey,
): Promise<IdempotentCreate> {
  const { keyId, idemKeyHash, fingerprint, now, ttlMs } = record;
  const batch = guarded(() =>
    db.batch([
      // A record past its 24 h no longer answers: make room for this request's.
      db
        .prepare(
          "DELETE FROM idempotency_records WHERE key_id = ?1 AND idem_key_hash = ?2 AND expires_at <= ?3",
        )
        .bind(keyId, idemKeyHash, now),
      db
        .prepare(
          `DELETE FROM idempotency_records WHERE (key_id, idem_key_hash) IN (
             SELECT key_id, idem_key_hash FROM idempotency_records WHERE expires_at <= ?1
             ORDER BY expires_at LIMIT ?2)`,
        )
        .bind(now, EXPIRED_RECORDS_SWEPT_PER_CREATE),
      db
        .prepare(
          `INSERT INTO pets (name, category_id, status) SELECT ?1, ?2, ?3
           WHERE NOT EXISTS (SELECT 1 FROM idempotency_records WHERE key_id = ?4 AND idem_key_hash = ?5)
           RETURNING ${PET_COLUMNS}`,
        )
        .bind(pet.name, pet.categoryId, pet.status, keyId, idemKeyHash),
      // Runs only when the insert above did (same condition, same transaction), naming its row.
      db
        .prepare(
          `INSERT INTO idempotency_records (key_id, idem_key_hash, fingerprint, pet_id, created_at, expires_at)
           SELECT ?1, ?2, ?3, last_insert_rowid(), ?4, ?5
           WHERE NOT EXISTS (SELECT 1 FROM idempotency_records WHERE key_id = ?1 AND idem_key_hash = ?2)`,
        )
        .bind(keyId, idemKeyHash, fingerprint, now, now + ttlMs),
      db
        .prepare(
          `SELECT p.id, p.name, p.category_id AS categoryId, p.status, r.fingerprint
           FROM idempotency_records r JOIN pets p ON p.id = r.pet_id
           WHERE r.key_id = ?1 AND r.idem_key_hash = ?2`,
        )
        .bind(keyId, idemKeyHash),
    ]),
  );
  // Outside `guarded`: a contradiction here is a bug (500), not an unavailable database (503).
  return batch.then(([, , insert, , found]): IdempotentCreate => {
    const created = (insert?.results as Pet[] | undefined)?.[0];
    const existing = (found?.results as RecordRow[] | undefined)?.[0];
    if (!existing) throw new Error("idempotent create neither inserted nor found a record");
    if (created) {
      if (existing.id !== created.id) throw new Error("idempotency record names another pet");
      return { outcome: "created", pet: created };
    }
    if (existing.fingerprint !== fingerprint) return { outcome: "key_reused" };
    const { fingerprint: _, ...stored } = existing;
    return { outcome: "replayed", pet: stored };
  });
}

export function getPet(db: Queryable, id: number): Promise<Pet | null> {
  return guarded(() =>
    db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?1`).bind(id).first<Pet>(),
  );
}
