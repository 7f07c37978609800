import { createApp } from "./app";
import { sweepEventOutbox } from "./db/webhook-event-outbox";
import { clock } from "./lib/clock";
import type { WebhookMessage } from "./lib/webhook-events";
import { consumeWebhookBatch } from "./routes/webhooks/consumer";
import { queueExpiringEvents } from "./routes/webhooks/expiring";

export { AuthShield } from "./objects/auth-shield";
export { QuotaHolder } from "./objects/quota-holder";
export { QuotaLimiter } from "./objects/quota-limiter";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  // Webhooks (docs/webhooks.md): the queue's consumer delivers, the hourly cron finds expiring keys.
  queue: (batch, env) => consumeWebhookBatch(batch as MessageBatch<WebhookMessage>, env),
  // The hourly cron also sweeps D1's webhook outbox: events their writer could not queue.
  scheduled: async (_controller, env) => {
    await queueExpiringEvents(env, clock.now());
    await sweepEventOutbox(env.DB, env.WEBHOOK_QUEUE);
  },
} satisfies ExportedHandler<Env>;
