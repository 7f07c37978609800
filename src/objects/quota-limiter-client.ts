import type { KeyMatch, KeyRecord } from "../db/keys";
import type { UsageDay } from "../db/usage-history";
import { clock } from "../lib/clock";
import { unavailable } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";
import type { NoDecision } from "../quota/fail-open";
import { type GiveBackCall, type LeaseCalls, LeaseHolder } from "../quota/lease-holder";
import { type Admission, type LeaseRequest, newAdmissionId } from "../quota/lease-messages";
import { EMPTY_USAGE, type KeyDecision, type Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import {
  type HolderAnswer,
  type HolderAuthentication,
  holderName,
  type QuotaHolder,
} from "./quota-holder";
import { type KeyUsage, keyUsageOf, type QuotaLimiter } from "./quota-limiter";
import { callWithOneRetry, isOverloaded, persistentFailureOf, placedIn } from "./stub-call";

/**
 * What the key's object reports at `now` before it has counted anything. The admin views of a key
 * never used (KeyRecord.firstUsedAt null) answer this rather than create the object.
 */
export const unusedKeyUsage = (policy: Policy, now: number): KeyUsage =>
  keyUsageOf(EMPTY_USAGE, policy, now);

/**
 * The decision (from the object, or from this isolate's lease), or why there is none: the
 * object is overloaded (the key's own traffic), or unreachable; with the last refusal this
 * isolate saw for the key, if it still lasts.
 */
export type AdmitResult =
  | {
      reached: true;
      decision: KeyDecision;
      /**
       * Work on this isolate's lease that the request does not wait for, to run after the
       * response (`waitUntil`): a renewal it started, and the hand-back of a lease's unused
       * permits at its expiry. Null when there is none.
       */
      afterResponse: Promise<void> | null;
    }
  | ({ reached: false } & NoDecision);

// This isolate's lease holder per key (bounded: a dropped holder's unused permits stay counted
// until their minute ends, the same as an isolate that goes away).
const holders = new ExpiringMap<string, LeaseHolder>(10_000);

function holderOf(keyId: string): LeaseHolder {
  let holder = holders.get(keyId, 0);
  if (!holder) {
    holder = new LeaseHolder();
    holders.set(keyId, holder, Infinity);
  }
  return holder;
}

/** Where a request arrived: its location's holders (objects/quota-holder.ts) and its name. */
export interface RequestLocation {
  holders: DurableObjectNamespace<QuotaHolder>;
  /** The Cloudflare location (`request.cf.colo`). */
  name: string;
}

/** Where `request` arrived (its Cloudflare location), or null when it does not say. */
export function locationOf(
  request: Request,
  holders: DurableObjectNamespace<QuotaHolder>,
): RequestLocation | null {
  const colo = (request.cf as { colo?: unknown } | undefined)?.colo;
  return typeof colo === "string" && colo !== "" ? { holders, name: colo } : null;
}

/**
 * What the key's holder in the request's location said of a key's secret, as the Worker uses it:
 * the key (with the decision on the request, if one was asked for and made), "unknown" (no
 * secret of the key matches: a guess), or "unread" (the holder could not be reached or could
 * not read the key: the Worker reads D1 itself).
 */
export type LocationAuthentication =
  | { outcome: "found"; match: KeyMatch; admission: AdmitResult | null }
  | { outcome: "unknown" }
  | { outcome: "unread" };

/** A holder's decision as `QuotaLimiterClient.admit` gives it (no isolate lease work to run after). */
function admitResultOf(answer: HolderAnswer): AdmitResult {
  return answer.reached
    ? { reached: true, decision: answer.decision, afterResponse: null }
    : answer;
}

/** The key's holder in `location`. */
function holderIn(location: RequestLocation, keyId: string): DurableObjectStub<QuotaHolder> {
  return location.holders.getByName(holderName(keyId, location.name));
}

async function askHolder(
  location: RequestLocation,
  keyId: string,
  ask: (holder: DurableObjectStub<QuotaHolder>) => Promise<HolderAuthentication>,
): Promise<LocationAuthentication> {
  let said: HolderAuthentication;
  try {
    said = await ask(holderIn(location, keyId));
  } catch (err) {
    log("warn", "location holder unreachable; reading the key from D1", {
      keyId,
      error: String(err),
    });
    return { outcome: "unread" };
  }
  if (said.outcome !== "found") return said;
  return {
    outcome: "found",
    match: said.match,
    admission: said.answer ? admitResultOf(said.answer) : null,
  };
}

/**
 * Authenticates the secret with hash `hash` of key `keyId` (named by its token) at the key's
 * holder in `location`, one local hop, without deciding the request.
 */
export function authenticateInLocation(
  location: RequestLocation,
  keyId: string,
  hash: string,
): Promise<LocationAuthentication> {
  return askHolder(location, keyId, (holder) => holder.authenticate(keyId, hash));
}

/**
 * As `authenticateInLocation`, and the holder decides the request in the same hop when the
 * secret may be used now (from its stock, or forwarded to the key's object; counted either way).
 */
export function authenticateAndAdmitInLocation(
  location: RequestLocation,
  keyId: string,
  hash: string,
  admissionId: string | null = null,
): Promise<LocationAuthentication> {
  return askHolder(location, keyId, (holder) =>
    holder.authenticateAndAdmit(keyId, hash, admissionId),
  );
}

/** An error that says why a location holder had no decision (read by `isOverloaded`). */
class HolderWithoutDecision extends Error {
  readonly overloaded: boolean;
  /** The refusal the holder was last given for the key, while it lasts. */
  readonly refusal: NoDecision["refusal"];
  /** The object's failure, when it fails every call (absent from a holder of the release before). */
  readonly persistentFailure: string | null;

  constructor(why: NoDecision) {
    super(
      why.overloaded
        ? "the key's quota object is overloaded"
        : "the key's quota object is unreachable",
    );
    this.overloaded = why.overloaded;
    this.refusal = why.refusal;
    this.persistentFailure = why.persistentFailure ?? null;
  }
}

/**
 * The Worker's side of one key's QuotaLimiter and of its holder in the request's location: the
 * only code that calls their stubs. Every call to the key's object is retried once on a
 * `.retryable` error (stub-call.ts); what happens when it still fails is the call site's policy,
 * stated on each method.
 */
export class QuotaLimiterClient {
  private readonly keyId: string;
  /** The key's region: where its object is created, if a call of this client is its first. */
  private readonly region: Region | null;

  constructor(
    private readonly namespace: DurableObjectNamespace<QuotaLimiter>,
    key: Pick<KeyRecord, "id" | "region">,
    /** The request's location; without one (never in production), the key's object decides. */
    private readonly location: RequestLocation | null = null,
    /** This isolate's leases of the key (another only for a test that plays several isolates). */
    private readonly leases: LeaseHolder | null = null,
  ) {
    this.keyId = key.id;
    this.region = key.region;
  }

  #isolateLeases(): LeaseHolder {
    return this.leases ?? holderOf(this.keyId);
  }

  /**
   * This isolate's leases of the key if it holds any: a usage read or a change has nothing to
   * hand back or drop in an isolate that never decided a request of the key, and makes no holder.
   */
  #leasesIfAny(): LeaseHolder | undefined {
    return this.leases ?? holders.get(this.keyId, 0);
  }

  /**
   * Decides one request: from this isolate's lease when it holds one, else by the object (which
   * counts it). Unreachable: `{ reached: false }` (the caller decides). `admissionId` names the
   * request (one per API request, the same in every attempt to decide it; made here if none is
   * given): a holder or object that decided it already answers the same decision, counted once.
   */
  async admit(policy: Policy, admissionId: string | null = null): Promise<AdmitResult> {
    const holder = this.#isolateLeases();
    try {
      const decided = await holder.admit(policy, this.#leaseCalls(policy, admissionId));
      // The renewal the admission started and the hand-back it leaves, after the response. Only
      // the renewal can fail here: a failed hand-back is logged by the call and kept for the next.
      const afterResponse =
        holder
          .upkeep(decided, this.#giveBackCall)
          ?.catch((err: unknown) =>
            log("warn", "could not renew a lease", { keyId: this.keyId, error: String(err) }),
          ) ?? null;
      return { reached: true, decision: decided.decision, afterResponse };
    } catch (err) {
      const overloaded = isOverloaded(err);
      const fromHolder = err instanceof HolderWithoutDecision ? err : null;
      const persistentFailure = fromHolder
        ? fromHolder.persistentFailure
        : persistentFailureOf(err);
      // A failure for good is logged once a minute by the answer to it (quota/fail-open.ts).
      if (!persistentFailure)
        log("warn", overloaded ? "quota limiter overloaded" : "quota limiter unreachable", {
          keyId: this.keyId,
          error: String(err),
        });
      // The refusal this isolate saw last, or else the one the location holder saw (a refusal
      // decided there for a cold isolate never reached this isolate's leases).
      const refusal = holder.refusal(clock.now()) ?? fromHolder?.refusal ?? null;
      return { reached: false, overloaded, refusal, persistentFailure };
    }
  }

  /** Hands a lease's unused permits back (needs no policy: one per client). */
  readonly #giveBackCall: GiveBackCall = {
    giveBack: (returned) =>
      this.#call(async (stub) => stub.returnLease(returned)).catch((err: unknown) => {
        log("warn", "could not give a lease back; it goes with the next call", {
          keyId: this.keyId,
          error: String(err),
        });
        throw err; // the lease holder keeps it for the next call
      }),
  };

  #leaseCalls(policy: Policy, admissionId: string | null): LeaseCalls {
    return {
      // One admit call per request at most: an id made here (none given) is still the same in
      // its retry and its fallback from the holder to the object.
      admit: (request) =>
        this.#admitCall(policy, {
          ...request,
          admissionId: admissionId ?? newAdmissionId(clock.now()),
        }),
      giveBack: this.#giveBackCall.giveBack,
      // Not retried: a renewal that reached the object before its connection failed has been
      // counted, and a second one would count its permits again. A lost renewal costs nothing
      // but a call: the lease in use runs out and the next request asks.
      renew: (request) => this.#stub().renewLease(policy, request),
    };
  }

  /** Current usage for the admin views. Unreachable: null (the view says so). */
  async usage(offered: Policy): Promise<KeyUsage | null> {
    await this.#handBackLease();
    return this.#call<KeyUsage>(async (stub) => stub.usage(offered)).catch((err: unknown) => {
      log("warn", "quota limiter unreachable for a usage view", {
        keyId: this.keyId,
        error: String(err),
      });
      return null;
    });
  }

  /**
   * Current usage and the days the object holds, in one call and without writing anything (the
   * key's own usage view). Unreachable: throws 503.
   */
  async reportOrThrow(offered: Policy): Promise<{ usage: KeyUsage; days: UsageDay[] }> {
    await this.#handBackLease();
    type Report = { usage: KeyUsage; days: UsageDay[] };
    return this.#call<Report>(async (stub) => stub.report(offered)).catch((err: unknown) => {
      log("warn", "quota limiter unreachable for the key's usage", {
        keyId: this.keyId,
        error: String(err),
      });
      throw unavailable("The key's quota object could not be reached; repeat the request.");
    });
  }

  /** Pushes a newer policy. Unreachable: throws 503, since the change is not enforced yet. */
  async configureOrThrow(policy: Policy): Promise<void> {
    // In this isolate the change applies from the very next request: no more admissions from
    // a lease granted under the old policy. Other isolates' leases end within ISOLATE_LEASE_MS.
    this.#leasesIfAny()?.dropLeaseAndRefusals();
    await this.#call((stub) => stub.configure(policy)).catch((err: unknown) => {
      log("error", "could not push key policy", { keyId: this.keyId, error: String(err) });
      throw unavailable("The change is saved but not yet enforced everywhere; repeat the request.");
    });
  }

  /** Lifts the ban. Unreachable: throws 503. */
  async unbanOrThrow(
    offered: Policy,
  ): Promise<{ bannedUntilBefore: number | null; usage: KeyUsage }> {
    this.#leasesIfAny()?.forgetRefusals();
    type Unbanned = { bannedUntilBefore: number | null; usage: KeyUsage };
    return this.#call<Unbanned>(async (stub) => stub.unban(offered)).catch((err: unknown) => {
      log("error", "could not unban", { keyId: this.keyId, error: String(err) });
      throw unavailable("The key's quota object could not be reached; repeat the request.");
    });
  }

  /**
   * The days the object holds (today, and any finished day not yet in D1), which it also writes
   * to D1. Unreachable: throws 503, since the current day cannot be read anywhere else.
   */
  async saveUsageHistoryOrThrow(): Promise<UsageDay[]> {
    await this.#handBackLease();
    return this.#call<UsageDay[]>(async (stub) => stub.saveUsageHistory()).catch((err: unknown) => {
      log("error", "quota limiter unreachable for usage history", {
        keyId: this.keyId,
        error: String(err),
      });
      throw unavailable("The key's quota object could not be reached; repeat the request.");
    });
  }

  /**
   * Hands this isolate's unused leased permits and its location holder's stock back before a
   * usage read, so the read is exact as far as this location goes (other leases come back
   * within STOCK_LEASE_MS + GIVE_BACK_GRACE_MS, a stock for the minute as its minute ends).
   * Never throws.
   */
  async #handBackLease(): Promise<void> {
    const leases = this.#leasesIfAny();
    await Promise.all([leases?.giveBackUnused(this.#giveBackCall), this.#handBackLocationStock()]);
  }

  /**
   * A request this isolate cannot decide from a lease of its own: decided by the key's holder in
   * this location (from its stock, or forwarded), over a local hop. A call that asks for a lease
   * or hands one back goes to the key's object through the holder, which hands its stock back in
   * the same call; a request whose holder cannot be reached goes to the key's object directly
   * (it decides it exactly, one far call).
   */
  async #admitCall(policy: Policy, request: LeaseRequest): Promise<Admission> {
    const location = this.location;
    if (location && request.want === 0 && request.returning.length === 0) {
      let answer: HolderAnswer | null = null;
      try {
        // Retried once on a `.retryable` error, and then asked of the key's object, with the
        // same admission id: whichever decided it already answers the same decision.
        answer = await callWithOneRetry(
          () => holderIn(location, this.keyId),
          async (holder): Promise<HolderAnswer> =>
            holder.admit(this.keyId, policy, this.region, request.admissionId ?? null),
        );
      } catch (err) {
        log("warn", "location holder unreachable; asking the key's object", {
          keyId: this.keyId,
          error: String(err),
        });
      }
      if (answer?.reached) return { ...answer.decision, lease: null };
      if (answer) throw new HolderWithoutDecision(answer);
    } else if (location) {
      // A lease of this isolate's own: asked through the holder, which hands its stock back in
      // the same call, so the location's permits are held by one tier at a time.
      try {
        return await holderIn(location, this.keyId).admitForIsolate(
          this.keyId,
          policy,
          request,
          this.region,
        );
      } catch (err) {
        log("warn", "location holder unreachable; asking the key's object", {
          keyId: this.keyId,
          error: String(err),
        });
      }
    }
    return this.#call<Admission>(async (stub) => stub.admit(policy, request));
  }

  /** Hands the stock of this location's holder back to the key's object; never throws. */
  async #handBackLocationStock(): Promise<void> {
    const location = this.location;
    if (!location) return;
    await holderIn(location, this.keyId)
      .giveBack(this.keyId)
      .catch((err: unknown) =>
        log("warn", "could not hand a location holder's stock back", {
          keyId: this.keyId,
          error: String(err),
        }),
      );
  }

  #call<T>(call: (stub: DurableObjectStub<QuotaLimiter>) => Promise<T>): Promise<T> {
    return callWithOneRetry(() => this.#stub(), call);
  }

  #stub(): DurableObjectStub<QuotaLimiter> {
    return this.namespace.getByName(this.keyId, placedIn(this.region));
  }
}
