import { createApp } from "./app";
import { sweepEventOutbox } from "./db/webhook-event-outbox";
import { clock } from "./lib/clock";
import type { WebhookMessage } from "./lib/webhook-events";
import { consumeWebhookBatch } from "./routes/webhooks/consumer";
import { consumeDeadLetters, isDeadLetterQueue } from "./routes/webhooks/dead-letters";
import { queueExpiringEvents } from "./routes/webhooks/expiring";
import { sealStoredSecrets } from "./routes/webhooks/seal-secrets";

export { AuthShield } from "./objects/auth-shield";
export { QuotaHolder } from "./objects/quota-holder";
export { QuotaLimiter } from "./objects/quota-limiter";

const app = createApp();

/**
 * The hourly expiry scan, then the sweep of D1's webhook outbox (events their writer could not
 * queue, the scan's included), which runs even when the scan failed.
 */
async function scanThenSweep(env: Env): Promise<void> {
  try {
    await queueExpiringEvents(env, clock.now());
  } finally {
    await sweepEventOutbox(env.DB, env.WEBHOOK_QUEUE);
  }
}

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  // Webhooks (docs/webhooks.md): the queue's consumer delivers; the hourly cron finds expiring
  // keys, sweeps D1's webhook outbox and seals the signing secrets not yet sealed under the
  // current key.
  // The dead-letter queue's consumer records what the webhook queue gave up on.
  queue: (batch, env, ctx) =>
    isDeadLetterQueue(batch.queue)
      ? consumeDeadLetters(batch as MessageBatch<WebhookMessage>, env)
      : consumeWebhookBatch(batch as MessageBatch<WebhookMessage>, env, ctx),
  scheduled: async (_controller, env) => {
    // Each runs whatever the other does; a failure of either still fails the run (and is logged).
    const runs = await Promise.allSettled([scanThenSweep(env), sealStoredSecrets(env)]);
    for (const run of runs) if (run.status === "rejected") throw run.reason;
  },
} satisfies ExportedHandler<Env>;
