-- Per key and UTC day, the permits leased to an isolate or a location holder and never reported
-- used (lost with it), apart from `admitted`, which counts requests served from then on. Days
-- stored before this migration have 0 here, and their `admitted` counted a lease's permits from
-- its grant, less those handed back unused.
ALTER TABLE key_usage_days ADD COLUMN stranded INTEGER NOT NULL DEFAULT 0;
