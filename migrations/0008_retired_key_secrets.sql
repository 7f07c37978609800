-- Secrets a second roll pushed out of previous_key_hash. They never authenticate again; they are
-- kept only so that a client still sending one is told its key was rolled (401, not counted as a
-- guess at a secret) instead of being taken for someone guessing keys.
CREATE TABLE retired_key_secrets (
  key_hash   TEXT    PRIMARY KEY,
  key_id     TEXT    NOT NULL,
  retired_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
