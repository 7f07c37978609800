-- When the key's quota object was first asked to decide one of the key's requests: written by
-- the Worker alongside that request's admission (never later than its answer), once, and never
-- moved. NULL: the key has never been used, its quota object does not exist, and the admin views
-- answer zeros without creating it (docs/operations.md, "Where a key's quota object lives").
ALTER TABLE api_keys ADD COLUMN first_used_at INTEGER;

-- Whether the keys issued before this column were used is not known here (today's requests live
-- in their objects only): they are taken as used from their creation, so their admin views keep
-- asking their objects as before.
UPDATE api_keys SET first_used_at = created_at;
