-- Webhook endpoints and their deliveries (docs/webhooks.md), and the audit actions on endpoints.

-- Where events are sent: for one owner's keys (owner_id) or for every key (owner_id NULL). The
-- signing secret must be kept (every delivery is signed with it), so unlike a key's it is not
-- hashed: it is sealed under WEBHOOK_ENCRYPTION_KEY (src/lib/sealed-secret.ts; rows stored before
-- sealing hold it as issued until the hourly pass seals them), and never returned after the
-- answer that created or rolled it. A roll keeps the
-- secret before it in previous_secret until previous_secret_expires_at: both sign meanwhile.
CREATE TABLE webhook_endpoints (
  id                         TEXT    PRIMARY KEY,
  owner_id                   TEXT    CHECK (owner_id IS NULL OR length(owner_id) BETWEEN 1 AND 200),
  url                        TEXT    NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  event_types                TEXT    NOT NULL CHECK (json_valid(event_types) AND json_type(event_types) = 'array'),
  description                TEXT    CHECK (description IS NULL OR length(description) <= 500),
  secret                     TEXT    NOT NULL,
  previous_secret            TEXT,
  previous_secret_expires_at INTEGER,
  secret_rolled_at           INTEGER,
  -- Set while the endpoint receives nothing: an operator disabled it, or its receiver answered 410.
  disabled_at                INTEGER,
  disabled_reason            TEXT,
  created_at                 INTEGER NOT NULL,
  updated_at                 INTEGER NOT NULL,
  -- Raised by every change; a write is conditional on the version it read.
  version                    INTEGER NOT NULL DEFAULT 1
) STRICT;

CREATE INDEX webhook_endpoints_by_created ON webhook_endpoints (created_at, id);
CREATE INDEX webhook_endpoints_by_owner ON webhook_endpoints (owner_id, created_at, id);

-- One row per event and endpoint: the delivery log. The event id is the receiver's dedupe key;
-- (endpoint_id, event_id) is unique, so an event produced twice is delivered once per endpoint.
CREATE TABLE webhook_deliveries (
  id              TEXT    PRIMARY KEY,
  endpoint_id     TEXT    NOT NULL,
  event_id        TEXT    NOT NULL,
  event_type      TEXT    NOT NULL,
  key_id          TEXT,
  payload         TEXT    NOT NULL CHECK (json_valid(payload)),
  status          TEXT    NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'failed', 'skipped')),
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  response_status INTEGER,
  latency_ms      INTEGER,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  delivered_at    INTEGER,
  next_attempt_at INTEGER,
  UNIQUE (endpoint_id, event_id)
) STRICT;

CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, created_at, id);

-- The expiry a key.expiring event was produced for (the key's expires_at then), so the hourly
-- scan produces it once per expiry; NULL: none yet.
ALTER TABLE api_keys ADD COLUMN expiring_event_for INTEGER;

-- The audit trail also records changes to webhook endpoints (key_id then holds the endpoint's
-- id, whe_…). SQLite cannot change a CHECK constraint in place, so the table is rebuilt with the
-- same rows and ids.
CREATE TABLE audit_log_new (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  at                INTEGER NOT NULL,
  actor             TEXT    NOT NULL,
  action            TEXT    NOT NULL CHECK (action IN ('create', 'update', 'revoke', 'roll', 'disable', 'enable', 'unban', 'ban', 'ban_end',
                                                      'webhook_create', 'webhook_update', 'webhook_delete', 'webhook_roll_secret', 'webhook_disable')),
  key_id            TEXT    NOT NULL,
  changes           TEXT    NOT NULL CHECK (json_valid(changes)),
  request_id        TEXT    NOT NULL,
  client_request_id TEXT
) STRICT;
INSERT INTO audit_log_new (id, at, actor, action, key_id, changes, request_id, client_request_id)
  SELECT id, at, actor, action, key_id, changes, request_id, client_request_id FROM audit_log;
DROP TABLE audit_log;
ALTER TABLE audit_log_new RENAME TO audit_log;
CREATE INDEX audit_log_by_key ON audit_log (key_id, id);
CREATE INDEX audit_log_by_actor ON audit_log (actor, id);
CREATE INDEX audit_log_by_at ON audit_log (at, id);
