-- Idempotent create: the pet made for (API key, Idempotency-Key, request fingerprint), and when.
-- The key's quota object answers retries and concurrent duplicates; this unique index is the
-- last line of defence, so that even a retry the object could not match never creates a second
-- pet. A reference older than 24 hours is released (set to NULL) before it could match.
ALTER TABLE pets ADD COLUMN idempotency_ref TEXT;
ALTER TABLE pets ADD COLUMN idempotency_at INTEGER;
CREATE UNIQUE INDEX pets_by_idempotency_ref ON pets (idempotency_ref) WHERE idempotency_ref IS NOT NULL;
