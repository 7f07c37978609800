import { endpointsNotSealedUnder, replaceStoredSecrets } from "../../db/webhooks";
import { configOrThrow, webhookSecretBoxOrThrow } from "../../lib/config";
import { log } from "../../lib/log";
import { currentSealPrefix, openSecretOrThrow, sealSecret } from "../../lib/sealed-secret";

/** Endpoints read per page, and the most a pass seals: the next hourly pass takes the rest. */
export const SEAL_LIMIT = 200;
/** Pages a pass reads at most, so rows it cannot open cost it a bounded number of reads. */
const SEAL_PAGES = 10;
/** How many of the endpoints it could not seal a pass names in its log line. */
const NAMED_UNSEALED = 20;

/**
 * The hourly pass (the Worker's scheduled() handler) that seals every stored signing secret under
 * WEBHOOK_ENCRYPTION_KEY: those stored before secrets were sealed, and after a rotation of the
 * key, those sealed under WEBHOOK_ENCRYPTION_KEY_PREVIOUS. The secrets stay the same (receivers
 * notice nothing); only how D1 holds them changes. It walks the endpoints in id order, so a row it
 * cannot open (sealed under a key this deployment no longer holds) is left as it is and passed,
 * never holding up the rows after it; the pass logs such rows in one line. Returns how many
 * endpoints it sealed.
 */
export async function sealStoredSecrets(env: Env): Promise<number> {
  const box = await webhookSecretBoxOrThrow(configOrThrow(env));
  const prefix = currentSealPrefix(box);
  let sealed = 0;
  let found = 0;
  const unsealed: { endpointId: string; error: string }[] = [];
  let afterId = "";
  for (let page = 0; page < SEAL_PAGES && sealed < SEAL_LIMIT; page++) {
    const rows = await endpointsNotSealedUnder(env.DB, prefix, { afterId, limit: SEAL_LIMIT });
    for (const stored of rows.slice(0, SEAL_LIMIT - sealed)) {
      found++;
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
        unsealed.push({ endpointId: stored.id, error: String(err) });
      }
    }
    if (rows.length < SEAL_LIMIT) break;
    afterId = rows.at(-1)!.id;
  }
  if (unsealed.length)
    log("error", "webhook secret not sealed", {
      count: unsealed.length,
      endpointIds: unsealed
        .slice(0, NAMED_UNSEALED)
        .map((u) => u.endpointId)
        .join(","),
      error: unsealed[0]!.error,
    });
  if (found) log("info", "webhook secrets sealed", { sealed, found });
  return sealed;
}
