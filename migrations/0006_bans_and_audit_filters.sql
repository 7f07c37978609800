-- Temporary bans as D1 knows them: the key's quota object writes when a ban starts and clears it
-- when the ban ends or is lifted, so the key list can find banned keys without asking every
-- key's object. Epoch ms; NULL when the key is not banned.
ALTER TABLE api_keys ADD COLUMN banned_until INTEGER;
CREATE INDEX api_keys_by_banned_until ON api_keys (banned_until) WHERE banned_until IS NOT NULL;

-- The audit trail also records automatic bans and their ends (actor 'system'). SQLite cannot
-- change a CHECK constraint in place, so the table is rebuilt with the same rows and ids.
CREATE TABLE audit_log_new (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  at         INTEGER NOT NULL,
  actor      TEXT    NOT NULL,
  action     TEXT    NOT NULL CHECK (action IN ('create', 'update', 'revoke', 'roll', 'disable', 'enable', 'unban', 'ban', 'ban_end')),
  key_id     TEXT    NOT NULL,
  changes    TEXT    NOT NULL CHECK (json_valid(changes)),
  request_id TEXT    NOT NULL
) STRICT;
INSERT INTO audit_log_new (id, at, actor, action, key_id, changes, request_id)
  SELECT id, at, actor, action, key_id, changes, request_id FROM audit_log;
DROP TABLE audit_log;
ALTER TABLE audit_log_new RENAME TO audit_log;
CREATE INDEX audit_log_by_key ON audit_log (key_id, id);
-- The audit filters: by actor, and by time (at) with the newest first.
CREATE INDEX audit_log_by_actor ON audit_log (actor, id);
CREATE INDEX audit_log_by_at ON audit_log (at, id);
