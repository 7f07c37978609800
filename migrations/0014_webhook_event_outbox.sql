-- Webhook events made by admin changes (key.revoked, key.rolled) and by the hourly expiry scan
-- (key.expiring), kept until the queue has them (docs/webhooks.md, "Delivery guarantees"). Each
-- is written in the same batch as the change it reports, so a change is never stored without its
-- event; the writer queues it after its answer and deletes the row, and the hourly scan queues
-- whatever is left (a queue that refused it, an isolate that died first). The event id is derived
-- from the key, the type and the window, so a row queued twice is one event to the receiver.
-- A new table: the release before neither reads nor writes it.
CREATE TABLE webhook_event_outbox (
  event_id   TEXT    PRIMARY KEY,
  -- The event as queued (lib/webhook-events.ts, ProducedEvent).
  event      TEXT    NOT NULL CHECK (json_valid(event)),
  created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX webhook_event_outbox_by_created ON webhook_event_outbox (created_at, event_id);
