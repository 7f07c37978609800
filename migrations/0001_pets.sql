-- Pets: one store shared by every API key.
-- AUTOINCREMENT so an id, once handed to a client, is never reused.
CREATE TABLE pets (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  category_id INTEGER NOT NULL CHECK (category_id BETWEEN 1 AND 9007199254740991),
  status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
) STRICT;

-- Serves `WHERE status = ? AND id > ? ORDER BY id LIMIT ?`; the unfiltered list walks the primary key.
CREATE INDEX pets_by_status_id ON pets (status, id);
