import { keepOutboxEvent } from "../../db/webhook-event-outbox";
import { markDeliveryDead } from "../../db/webhooks";
import { clock } from "../../lib/clock";
import { log } from "../../lib/log";
import type { WebhookMessage } from "../../lib/webhook-events";

/** The dead-letter queues' names end so (wrangler.toml: `<queue>-dlq`). */
const DEAD_LETTER_SUFFIX = "-dlq";

/** Whether a batch comes from a dead-letter queue rather than from the webhook queue. */
export const isDeadLetterQueue = (queue: string): boolean => queue.endsWith(DEAD_LETTER_SUFFIX);

/**
 * The dead-letter queue's consumer: what the webhook queue gave up on after its last retry. A
 * delivery is marked `dead` in the delivery log (a final state until "send again"); an event
 * whose fan-out kept failing goes back to D1's webhook outbox, which the hourly sweep queues
 * again. A message whose recording fails (D1 unavailable) is retried.
 */
export async function consumeDeadLetters(
  batch: MessageBatch<WebhookMessage>,
  env: Env,
): Promise<void> {
  const now = clock.now();
  await Promise.all(
    batch.messages.map(async (message) => {
      const body = message.body;
      try {
        if (body.kind === "delivery")
          await markDeliveryDead(env.DB, body.deliveryId, now, body.chain);
        else await keepOutboxEvent(env.DB, body.event, now);
        log("warn", "webhook message dead-lettered", {
          kind: body.kind,
          id: body.kind === "delivery" ? body.deliveryId : body.event.id,
        });
        message.ack();
      } catch (err) {
        log("warn", "dead-lettered webhook message not recorded; retrying", {
          kind: body.kind,
          error: String(err),
        });
        message.retry();
      }
    }),
  );
}
