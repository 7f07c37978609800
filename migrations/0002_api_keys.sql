-- The API key registry. Only a SHA-256 hash of each key and a short display prefix are stored.
CREATE TABLE api_keys (
  id          TEXT    PRIMARY KEY,
  name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  key_hash    TEXT    NOT NULL UNIQUE,
  key_prefix  TEXT    NOT NULL,
  plan        TEXT    NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
  -- Own limits, only for enterprise keys; other plans take theirs from the plan table in code.
  per_minute  INTEGER CHECK (per_minute IS NULL OR per_minute >= 1),
  per_day     INTEGER CHECK (per_day IS NULL OR per_day >= 1),
  -- Bumped on every change so the key's quota object can tell a newer policy from a stale one.
  version     INTEGER NOT NULL DEFAULT 1,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  revoked_at  INTEGER,
  expires_at  INTEGER,
  CHECK ((plan = 'enterprise') = (per_minute IS NOT NULL AND per_day IS NOT NULL))
) STRICT;

CREATE INDEX api_keys_by_created ON api_keys (created_at, id);
