-- Idempotent create in one D1 round trip: the record of each (API key, Idempotency-Key) lives
-- here, written in the same batch (one transaction) as the pet it made, so there is no claim that
-- could be left behind by a request that died, and a retry needs no other store.
-- idem_key_hash is the SHA-256 (hex) of the Idempotency-Key: fixed width whatever the client sent.
-- fingerprint is the SHA-256 of the validated request body; a retry with another body gets 422.
-- A record whose expires_at has passed (24 h) is replaced by the next request with that key.
CREATE TABLE idempotency_records (
  key_id        TEXT    NOT NULL,
  idem_key_hash TEXT    NOT NULL CHECK (length(idem_key_hash) = 64),
  fingerprint   TEXT    NOT NULL CHECK (length(fingerprint) = 64),
  pet_id        INTEGER NOT NULL REFERENCES pets (id),
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  PRIMARY KEY (key_id, idem_key_hash)
) STRICT, WITHOUT ROWID;

-- Creates made before this migration kept their reference on the pet
-- ("<key id>:<sha256 of Idempotency-Key>:<fingerprint>", see 0003): carry the ones still within
-- 24 h over, so a retry of such a create replays instead of making a second pet. The pets columns
-- stay (unused from now on) so code still running during a deploy can write them.
INSERT INTO idempotency_records (key_id, idem_key_hash, fingerprint, pet_id, created_at, expires_at)
SELECT substr(idempotency_ref, 1, length(idempotency_ref) - 130),
       substr(idempotency_ref, length(idempotency_ref) - 128, 64),
       substr(idempotency_ref, length(idempotency_ref) - 63, 64),
       id, idempotency_at, idempotency_at + 86400000
FROM pets
WHERE idempotency_ref IS NOT NULL AND idempotency_at IS NOT NULL
  AND length(idempotency_ref) > 130
  AND substr(idempotency_ref, length(idempotency_ref) - 129, 1) = ':'
  AND substr(idempotency_ref, length(idempotency_ref) - 64, 1) = ':';

-- Every idempotent create also deletes a few expired records (oldest first), so the table holds
-- about one day of creates, with no scheduled job.
CREATE INDEX idempotency_records_by_expiry ON idempotency_records (expires_at);
