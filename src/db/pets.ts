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

export interface IdempotencyGuard {
  ref: string;
  now: number;
  /** References recorded before this instant have lapsed and no longer match. */
  notBefore: number;
}

/**
 * Inserts a pet unless one was made under the same reference since `notBefore`; that pet is
 * then returned (`created: false`). One atomic batch: lapse the old reference, then insert.
 */
export function createPetOnce(
  db: Queryable,
  pet: NewPet,
  guard: IdempotencyGuard,
): Promise<{ pet: Pet; created: boolean }> {
  return guarded(async () => {
    const [, insert] = await db.batch<Pet>([
      db
        .prepare(
          "UPDATE pets SET idempotency_ref = NULL WHERE idempotency_ref = ?1 AND idempotency_at < ?2",
        )
        .bind(guard.ref, guard.notBefore),
      db
        .prepare(
          `INSERT INTO pets (name, category_id, status, idempotency_ref, idempotency_at) VALUES (?1, ?2, ?3, ?4, ?5)
           ON CONFLICT (idempotency_ref) WHERE idempotency_ref IS NOT NULL DO NOTHING RETURNING ${PET_COLUMNS}`,
        )
        .bind(pet.name, pet.categoryId, pet.status, guard.ref, guard.now),
    ]);
    const inserted = insert?.results[0];
    if (inserted) return { pet: inserted, created: true };
    const existing = await db
      .prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE idempotency_ref = ?1`)
      .bind(guard.ref)
      .first<Pet>();
    if (!existing) throw new Error("idempotent insert neither inserted nor found a pet");
    return { pet: existing, created: false };
  });
}

export function getPet(db: Queryable, id: number): Promise<Pet | null> {
  return guarded(() =>
    db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?1`).bind(id).first<Pet>(),
  );
}
