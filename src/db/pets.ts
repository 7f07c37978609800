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

export function listPets(db: Queryable, { limit, status, afterId = 0 }: ListPetsOptions): Promise<Pet[]> {
  return guarded(async () => {
    const stmt = status
      ? db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE status = ?1 AND id > ?2 ORDER BY id LIMIT ?3`).bind(status, afterId, limit)
      : db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id > ?1 ORDER BY id LIMIT ?2`).bind(afterId, limit);
    return (await stmt.all<Pet>()).results;
  });
}

export async function createPet(db: Queryable, pet: NewPet): Promise<Pet> {
  return (await createPetOnce(db, pet, null)).pet;
}

/**
 * Inserts a pet unless one was already made under `idempotencyRef`, which is then returned
 * (`created: false`): a retried create never makes a second pet.
 */
export function createPetOnce(db: Queryable, pet: NewPet, idempotencyRef: string | null): Promise<{ pet: Pet; created: boolean }> {
  return guarded(async () => {
    const inserted = await db
      .prepare(
        `INSERT INTO pets (name, category_id, status, idempotency_ref) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (idempotency_ref) WHERE idempotency_ref IS NOT NULL DO NOTHING RETURNING ${PET_COLUMNS}`,
      )
      .bind(pet.name, pet.categoryId, pet.status, idempotencyRef)
      .first<Pet>();
    if (inserted) return { pet: inserted, created: true };
    const existing = await db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE idempotency_ref = ?1`).bind(idempotencyRef).first<Pet>();
    if (!existing) throw new Error("INSERT … RETURNING returned no row");
    return { pet: existing, created: false };
  });
}

export function getPet(db: Queryable, id: number): Promise<Pet | null> {
  return guarded(() => db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?1`).bind(id).first<Pet>());
}
