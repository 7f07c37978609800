import type { KeyRecord } from "../db/keys";
import type { UsageDay } from "../db/usage-history";
import { clock } from "../lib/clock";
import { unavailable } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import { type LogLevel, logFailure } from "../lib/log";
import { type GiveBackCall, type LeaseCalls, LeaseHolder } from "../quota/lease-holder";
import { newAdmissionId } from "../quota/lease-messages";
import { EMPTY_USAGE, type KeyUsage, keyUsageOf, type Policy } from "../quota/windows";
import {
  type AdmitResult,
  admitInLocationOrThrow,
  HolderWithoutDecision,
  handBackLocationStock,
  type RequestLocation,
} from "./quota-holder-client";
import type { QuotaLimiter } from "./quota-limiter";
import { callWithOneRetry, isOverloaded, persistentFailureOf, placedIn } from "./stub-call";

/** What the key's object reports before it has counted anything (for a key never used). */
export const unusedKeyUsage = (policy: Policy, now: number): KeyUsage =>
  keyUsageOf(EMPTY_USAGE, policy, now);

// This isolate's lease holder per key (bounded: a dropped holder's unused permits stay counted
// until their minute ends, the same as an isolate that goes away).
const holders = new ExpiringMap<string, LeaseHolder>(10_000);

/**
 * The Worker's side of one key's QuotaLimiter (and, through quota-holder-client.ts, of its
 * location holder). Calls are retried once (stub-call.ts); each method says what a failure does.
 */
export class QuotaLimiterClient {
  constructor(
    private readonly namespace: DurableObjectNamespace<QuotaLimiter>,
    private readonly key: Pick<KeyRecord, "id" | "region">,
    /**
     * The request's location, or a function that finds it when a call goes out: reading
     * `request.cf` is a native call, and a request decided from a lease needs none.
     */
    private where: RequestLocation | null | (() => RequestLocation | null) = null,
    /** This isolate's leases of the key (another only for a test that plays several isolates). */
    private readonly leases: LeaseHolder | null = null,
  ) {}

  get #location(): RequestLocation | null {
    if (typeof this.where === "function") this.where = this.where();
    return this.where;
  }

  /** This isolate's leases of the key, if any (a usage read or a change makes none). */
  #leasesIfAny(): LeaseHolder | undefined {
    return this.leases ?? holders.get(this.key.id, 0);
  }

  #isolateLeases(): LeaseHolder {
    const kept = this.#leasesIfAny();
    if (kept) return kept;
    const made = new LeaseHolder();
    holders.set(this.key.id, made, Infinity);
    return made;
  }

  /** Decides one request (lease, location, object); unreachable: `{ reached: false }`. */
  async admit(policy: Policy, admissionId: string | null = null): Promise<AdmitResult> {
    const holder = this.#isolateLeases();
    try {
      const decided = await holder.admit(policy, this.#leaseCalls(policy, admissionId));
      // Only the renewal can fail here: a failed hand-back is logged and kept for the next call.
      const afterResponse =
        holder
          .upkeep(decided, this.#giveBackCall)
          ?.catch((err: unknown) =>
            logFailure("warn", "could not renew a lease", err, { keyId: this.key.id }),
          ) ?? null;
      return { reached: true, decision: decided.decision, afterResponse };
    } catch (err) {
      const overloaded = isOverloaded(err);
      const fromHolder = err instanceof HolderWithoutDecision ? err : null;
      const persistentFailure = fromHolder?.why.persistentFailure ?? persistentFailureOf(err);
      // A failure for good is logged by the answer to it (quota/fail-open.ts).
      const failure = overloaded ? "quota limiter overloaded" : "quota limiter unreachable";
      if (!persistentFailure) logFailure("warn", failure, err, { keyId: this.key.id });
      // Else the refusal the location holder saw (one decided there never reached these leases).
      const refusal = holder.refusal(clock.now()) ?? fromHolder?.why.refusal ?? null;
      return { reached: false, overloaded, refusal, persistentFailure };
    }
  }

  readonly #giveBackCall: GiveBackCall = {
    giveBack: (returned) =>
      this.#call(async (stub) => stub.returnLease(returned)).catch((err: unknown) => {
        const failure = "could not give a lease back; it goes with the next call";
        logFailure("warn", failure, err, { keyId: this.key.id });
        throw err; // the lease holder keeps it for the next call
      }),
  };

  #leaseCalls(policy: Policy, admissionId: string | null): LeaseCalls {
    return {
      // In this location, else by the key's object; an id made here is the same in its retry and
      // its fallback from the holder to the object.
      admit: async (asked) => {
        const request = { ...asked, admissionId: admissionId ?? newAdmissionId(clock.now()) };
        const { id, region } = this.key;
        const where = this.#location;
        const decided = where && (await admitInLocationOrThrow(where, id, region, policy, request));
        return decided ?? this.#call(async (stub) => stub.admit(policy, request));
      },
      giveBack: this.#giveBackCall.giveBack,
      // Not retried: a renewal that reached the object before its connection failed was counted.
      // A lost one costs a call: the lease in use runs out and the next request asks.
      renew: (request) => this.#stub().renewLease(policy, request),
    };
  }

  /** Current usage for the admin views. Unreachable: null (the view says so). */
  async usage(offered: Policy): Promise<KeyUsage | null> {
    await this.#handBackLease();
    return this.#call<KeyUsage>(async (stub) => stub.usage(offered)).catch((err: unknown) => {
      logFailure("warn", "quota limiter unreachable for a usage view", err, { keyId: this.key.id });
      return null;
    });
  }

  /** Usage and the days the object holds, writing nothing (GET /v1/usage). Unreachable: 503. */
  async reportOrThrow(offered: Policy): Promise<{ usage: KeyUsage; days: UsageDay[] }> {
    await this.#handBackLease();
    const failure = "quota limiter unreachable for the key's usage";
    return this.#callOrThrow(async (stub) => stub.report(offered), "warn", failure);
  }

  /** Pushes a newer policy. Unreachable: throws 503, since the change is not enforced yet. */
  async configureOrThrow(policy: Policy): Promise<void> {
    // Here from the very next request; other isolates' leases end within ISOLATE_LEASE_MS.
    this.#leasesIfAny()?.dropLeaseAndRefusals();
    const failure = "could not push key policy";
    const message = "The change is saved but not yet enforced everywhere; repeat the request.";
    await this.#callOrThrow((stub) => stub.configure(policy), "error", failure, message);
  }

  /** Lifts the ban. Unreachable: throws 503. */
  async unbanOrThrow(
    offered: Policy,
  ): Promise<{ bannedUntilBefore: number | null; usage: KeyUsage }> {
    this.#leasesIfAny()?.forgetRefusals();
    return this.#callOrThrow(async (stub) => stub.unban(offered), "error", "could not unban");
  }

  /** The days the object holds, which it also writes to D1. Unreachable: 503 (today is only there). */
  async saveUsageHistoryOrThrow(): Promise<UsageDay[]> {
    await this.#handBackLease();
    const failure = "quota limiter unreachable for usage history";
    return this.#callOrThrow(async (stub) => stub.saveUsageHistory(), "error", failure);
  }

  /** Hands this location's permits back before a usage read (exact here). Never throws. */
  async #handBackLease(): Promise<void> {
    const leases = this.#leasesIfAny();
    const where = this.#location;
    const location = where && handBackLocationStock(where, this.key.id);
    await Promise.all([leases?.giveBackUnused(this.#giveBackCall), location]);
  }

  #call<T>(call: (stub: DurableObjectStub<QuotaLimiter>) => Promise<T>): Promise<T> {
    return callWithOneRetry(() => this.#stub(), call);
  }

  /** As `#call`; when it still fails, logs `failure` at `level` and throws 503 with `message`. */
  #callOrThrow<T>(
    call: (stub: DurableObjectStub<QuotaLimiter>) => Promise<T>,
    level: LogLevel,
    failure: string,
    message = "The key's quota object could not be reached; repeat the request.",
  ): Promise<T> {
    return this.#call(call).catch((err: unknown) => {
      logFailure(level, failure, err, { keyId: this.key.id });
      throw unavailable(message);
    });
  }

  #stub(): DurableObjectStub<QuotaLimiter> {
    return this.namespace.getByName(this.key.id, placedIn(this.key.region));
  }
}
