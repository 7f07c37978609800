-- When a delivery's message reached the dead-letter queue (docs/webhooks.md): every attempt
-- failed, or none could be made. The delivery log shows it as `dead`, a final state until "send
-- again" clears it. A new nullable column: the release before neither reads nor writes it, and
-- shows such a delivery as `failed`.
ALTER TABLE webhook_deliveries ADD COLUMN dead_at INTEGER;
