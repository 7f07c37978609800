-- Operators: key lifecycle (disable, roll, owner and metadata), the audit trail and usage history.

-- Set while an operator has disabled the key (PATCH {"enabled": false}); cleared by enabling it.
ALTER TABLE api_keys ADD COLUMN disabled_at INTEGER;
-- Who the key belongs to, in the operator's own terms (a customer or account id).
ALTER TABLE api_keys ADD COLUMN owner_id TEXT CHECK (owner_id IS NULL OR length(owner_id) BETWEEN 1 AND 200);
-- A JSON object of at most 2 KiB, as the operator sent it.
ALTER TABLE api_keys ADD COLUMN meta TEXT CHECK (meta IS NULL OR (json_valid(meta) AND json_type(meta) = 'object'));
-- A roll moves the old secret's hash here; it authenticates until previous_key_expires_at, and
-- after that is recognised only to say that the key was rolled.
ALTER TABLE api_keys ADD COLUMN previous_key_hash TEXT;
ALTER TABLE api_keys ADD COLUMN previous_key_expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN rolled_at INTEGER;

CREATE UNIQUE INDEX api_keys_by_previous_hash ON api_keys (previous_key_hash) WHERE previous_key_hash IS NOT NULL;
CREATE INDEX api_keys_by_owner ON api_keys (owner_id, created_at, id) WHERE owner_id IS NOT NULL;

-- Per key and UTC day: what its quota object admitted and refused, by reason. Written by the
-- object when the day ends and whenever its usage is read; the object's own totals only grow,
-- so a write never lowers a stored number (see db/usage-history.ts).
CREATE TABLE key_usage_days (
  key_id         TEXT    NOT NULL,
  day            TEXT    NOT NULL CHECK (day GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
  admitted       INTEGER NOT NULL CHECK (admitted >= 0),
  rate_limited   INTEGER NOT NULL CHECK (rate_limited >= 0),
  quota_exceeded INTEGER NOT NULL CHECK (quota_exceeded >= 0),
  key_banned     INTEGER NOT NULL CHECK (key_banned >= 0),
  PRIMARY KEY (key_id, day)
) STRICT;

CREATE INDEX key_usage_days_by_day ON key_usage_days (day, key_id);

-- Every admin write, appended in the same D1 batch as the change itself. `changes` is a JSON
-- object {field: {before, after}}; it never holds a secret or a hash.
CREATE TABLE audit_log (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  at         INTEGER NOT NULL,
  actor      TEXT    NOT NULL,
  action     TEXT    NOT NULL CHECK (action IN ('create', 'update', 'revoke', 'roll', 'disable', 'enable', 'unban')),
  key_id     TEXT    NOT NULL,
  changes    TEXT    NOT NULL CHECK (json_valid(changes)),
  request_id TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_log_by_key ON audit_log (key_id, id);
