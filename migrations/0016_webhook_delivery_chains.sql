-- Which message carries a delivery's retries (docs/webhooks.md, "One retry chain per delivery"):
-- queued_chain is the token of the last message queued for it, queued_at when it was queued. A
-- message whose token is not the delivery's is dropped unattempted, so an event fanned out twice,
-- or a delivery sent again while retrying, runs one chain of attempts. New nullable columns: the
-- release before neither reads nor writes them, and its messages carry no token (attempted).
ALTER TABLE webhook_deliveries ADD COLUMN queued_at INTEGER;
ALTER TABLE webhook_deliveries ADD COLUMN queued_chain TEXT;
