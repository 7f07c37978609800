import { logFailure } from "../lib/log";
import { withDeadline } from "../quota/call-coordination";
import { CHANGE_APPLIES_WITHIN_MS } from "../quota/lease";
import type { QuotaHolder } from "./quota-holder";

/**
 * Location holder `waiting` was granted less than a quiet stock only because the stocks for the
 * minute of location holders `sharers` hold the rest of heldBound (LeaseLedger.takeSharing).
 */
export type Sharing = { waiting: string; sharers: string[] };

/**
 * Asks each of `sharing.sharers` to restock (QuotaHolder.restock: it hands its stock back and
 * takes a fresh one, sized as shared, in one call of its own), waiting for them at most as long
 * as for a change's push, then asks the waiting holder to restock (it asks for its stock). Meant
 * for the key's object's `waitUntil`: the answer that brought no stock is not held up, and every
 * permit is still granted by the key's object, within heldBound, in those holders' own calls.
 */
export async function askToShare(
  holders: DurableObjectNamespace<QuotaHolder>,
  keyId: string,
  { waiting, sharers }: Sharing,
): Promise<void> {
  const restock = (name: string) =>
    holders
      .getByName(name)
      .restock(keyId)
      .catch((err: unknown) => {
        const failure = "could not ask a location holder to share its key's stock";
        logFailure("warn", failure, err, { keyId, holder: name });
      });
  await withDeadline(Promise.all(sharers.map(restock)), CHANGE_APPLIES_WITHIN_MS).catch(
    () => undefined,
  );
  await restock(waiting);
}
