import { logFailure } from "../lib/log";
import { withDeadline } from "../quota/call-coordination";
import { CHANGE_APPLIES_WITHIN_MS } from "../quota/lease";
import type { QuotaHolder } from "./quota-holder";

/**
 * How long a change to the key waits for the location holders it is pushed to: the bound every
 * change keeps, since a holder stops admitting from its stock when the push reaches it.
 */
export const PUSH_DEADLINE_MS = CHANGE_APPLIES_WITHIN_MS;

/**
 * Tells each location holder of `grantees` (holding a lease of key `keyId`, standing permits
 * included) to stop admitting from it, so that it forwards the key's next requests to the key's
 * object (a change, or a ban that began), waiting at most PUSH_DEADLINE_MS.
 */
export async function tellHoldersOfChange(
  holders: DurableObjectNamespace<QuotaHolder>,
  keyId: string,
  grantees: readonly string[],
): Promise<void> {
  if (grantees.length === 0) return;
  const pushes = Promise.all(
    grantees.map((name) =>
      holders
        .getByName(name)
        .keyChanged(keyId)
        .catch((err: unknown) => {
          const failure = "could not tell a location holder of a change to its key";
          logFailure("warn", failure, err, { keyId, holder: name });
        }),
    ),
  );
  // Each push logs its own failure, so only the deadline rejects: past it, the caller answers.
  await withDeadline(pushes, PUSH_DEADLINE_MS).catch(() => undefined);
}

/**
 * Location holder `waiting` was granted less than a quiet stock only because the stocks for the
 * minute of location holders `sharers` hold the rest of heldBound (LeaseLedger.takeSharing).
 */
export type Sharing = { waiting: string; sharers: string[] };

/**
 * Asks each of `sharing.sharers` to restock (QuotaHolder.restock: it hands its stock back and
 * takes a fresh one, sized as shared, in one call of its own), waiting for them at most
 * PUSH_DEADLINE_MS, then asks the waiting holder to restock (it asks for its stock). Meant
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
  await withDeadline(Promise.all(sharers.map(restock)), PUSH_DEADLINE_MS).catch(() => undefined);
  await restock(waiting);
}
