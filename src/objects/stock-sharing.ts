import { logFailure } from "../lib/log";
import { withDeadline } from "../quota/call-coordination";
import { CHANGE_APPLIES_WITHIN_MS, STOCK_SHARED_WITHIN_MS } from "../quota/lease";
import type { SharedStock } from "../quota/lease-messages";
import type { QuotaHolder } from "./quota-holder";

/**
 * How long a change to the key waits for the location holders it is pushed to: the bound every
 * change keeps, since a holder stops admitting from its stock when the push reaches it.
 */
export const PUSH_DEADLINE_MS = CHANGE_APPLIES_WITHIN_MS;

/** Tells `grantees` to stop using their leases (a change, or a ban): PUSH_DEADLINE_MS at most. */
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
 * Location holder `waiting` was granted less than a quiet stock only because `sharers` hold the
 * rest of heldBound; in a renewal it is pushed a restock after them (`tellWaiting`), else its
 * refill waits (`heldFor`).
 */
export type Sharing = { waiting: string; sharers: string[]; tellWaiting: boolean };

/**
 * What the key's object remembers, in memory only, of the location holders sharing heldBound
 * (an evicted object forgets: a location may be sized alone for a minute, or asked twice).
 */
export class StockSharing {
  /** When each holder last asked for permits ("" for an isolate), for STOCK_SHARED_WITHIN_MS. */
  readonly #askedAt = new Map<string, number>();
  /** The minute each location holder short of a stock last had others asked to share with it. */
  readonly #sharedFor = new Map<string, number>();
  /** The sharing the last lend asked for, until the object takes it (`take`). */
  #sharing: Sharing | null = null;
  /** The sharing under way for each waiting location holder, until the sharers answered. */
  readonly #underWay = new Map<string, Promise<void>>();

  /** `grantee` (null: an isolate) asks: true if a holder alone in STOCK_SHARED_WITHIN_MS. */
  noteAsking(grantee: string | null, now: number): boolean {
    const self = grantee ?? "";
    this.#askedAt.set(self, now);
    let alone = grantee !== null;
    for (const [holder, at] of this.#askedAt) {
      if (now - at >= STOCK_SHARED_WITHIN_MS) this.#askedAt.delete(holder);
      else if (holder !== self) alone = false;
    }
    return alone;
  }

  /** Whether others were asked to share with location holder `waiting` in minute `minuteStart`. */
  askedThisMinute(waiting: string, minuteStart: number): boolean {
    return this.#sharedFor.get(waiting) === minuteStart;
  }

  /** Notes `sharing`, asked in minute `minuteStart`, for the object to take (`take`). */
  ask(sharing: Sharing, minuteStart: number): void {
    for (const [holder, minute] of this.#sharedFor)
      if (minute !== minuteStart) this.#sharedFor.delete(holder);
    this.#sharedFor.set(sharing.waiting, minuteStart);
    this.#sharing = sharing;
  }

  /** The sharing asked for last (see `ask`), once: null when none. */
  take(): Sharing | null {
    const sharing = this.#sharing;
    this.#sharing = null;
    return sharing;
  }

  /** Notes `sharing` (never rejecting) as under way for location holder `waiting`. */
  underWay(waiting: string, sharing: Promise<void>): void {
    this.#underWay.set(
      waiting,
      sharing.finally(() => this.#underWay.delete(waiting)),
    );
  }

  /** The sharing under way for location holder `grantee`, which its refill waits for. */
  heldFor(grantee: string | null): Promise<void> | undefined {
    return grantee === null ? undefined : this.#underWay.get(grantee);
  }
}

/**
 * Asks each of `sharers` to share the bound (QuotaHolder.restock), at most PUSH_DEADLINE_MS, gives
 * `take` what they gave up, then pushes `waiting` a restock if `tellWaiting` (docs/quotas.md).
 */
export async function askToShare(
  holders: DurableObjectNamespace<QuotaHolder>,
  keyId: string,
  { waiting, sharers, tellWaiting }: Sharing,
  take: (shared: SharedStock[]) => void,
): Promise<void> {
  const restock = (name: string) =>
    holders
      .getByName(name)
      .restock(keyId)
      .then((shared) => (shared ? { ...shared } : null))
      .catch((err: unknown) => {
        const failure = "could not ask a location holder to share its key's stock";
        logFailure("warn", failure, err, { keyId, holder: name });
        return null;
      });
  const answers = Promise.all(sharers.map(restock));
  const shared = await withDeadline(answers, PUSH_DEADLINE_MS).catch(() => []);
  take(shared.flatMap((s) => (s ? [s] : [])));
  if (tellWaiting) await restock(waiting);
}
