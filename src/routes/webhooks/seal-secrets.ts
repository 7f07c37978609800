import { endpointsNotSealedUnder, replaceStoredSecrets } from "../../db/webhooks";
import { configOrThrow, webhookSecretBoxOrThrow } from "../../lib/config";
import { log } from "../../lib/log";
import { currentSealPrefix, openSecretOrThrow, sealSecret } from "../../lib/sealed-secret";

/** Endpoints handled per pass: the pass runs hourly, and the next one takes the rest. */
const SEAL_LIMIT = 200;

/**
 * The hourly pass (the Worker's scheduled() handler) that seals every stored signing secret under
 * WEBHOOK_ENCRYPTION_KEY: those stored before secrets were sealed, and after a rotation of the
 * key, those sealed under WEBHOOK_ENCRYPTION_KEY_PREVIOUS. The secrets stay the same (receivers
 * notice nothing); only how D1 holds them changes. Returns how many endpoints it sealed.
 */
export async function sealStoredSecrets(env: Env): Promise<number> {
  const box = await webhookSecretBoxOrThrow(configOrThrow(env));
  const found = await endpointsNotSealedUnder(env.DB, currentSealPrefix(box), SEAL_LIMIT);
  let sealed = 0;
  for (const stored of found) {
    const reseal = async (value: string) =>
      sealSecret(box, stored.id, await openSecretOrThrow(box, stored.id, value));
    try {
      const after = {
        id: stored.id,
        secret: await reseal(stored.secret),
        previousSecret: stored.previousSecret && (await reseal(stored.previousSecret)),
      };
      if (await replaceStoredSecrets(env.DB, stored, after)) sealed++;
    } catch (err) {
      // Sealed under a key this deployment no longer holds: it stays as it is, and is logged.
      log("error", "webhook secret not sealed", { endpointId: stored.id, error: String(err) });
    }
  }
  if (found.length) log("info", "webhook secrets sealed", { sealed, found: found.length });
  return sealed;
}
