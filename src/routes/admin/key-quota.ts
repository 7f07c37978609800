import { forgetKey } from "../../auth/key-cache";
import type { KeyRecord } from "../../db/keys";
import { policyOf } from "../../db/keys";
import type { UsageDay } from "../../db/usage-history";
import { clock } from "../../lib/clock";
import type { KeyUsage } from "../../objects/quota-limiter";
import {
  locationOf,
  QuotaLimiterClient,
  type RequestLocation,
  unusedKeyUsage,
} from "../../objects/quota-limiter-client";
import type { Policy } from "../../quota/windows";

/**
 * A key's quota object as the admin API reads and changes it, for the key as `record` has it.
 *
 * A key never used (`firstUsedAt` null) has no object: its first request creates it, in the
 * location it is first used from. So reads of such a key answer zeros and create none, and a
 * change has nothing to tell (the key's first request brings the policy along; see
 * middleware/first-use.ts). Reads of one key first hand back what this isolate and the
 * request's location hold of it, so they are exact as far as this location goes.
 *
 * @example
 * const usage = await adminKeyQuota(c.env, c.req.raw, record).usage(); // null if unreachable
 */
export function adminKeyQuota(env: Env, request: Request, record: KeyRecord) {
  const policy: Policy = policyOf(record);
  const clientIn = (location: RequestLocation | null) =>
    record.firstUsedAt === null ? null : new QuotaLimiterClient(env.QUOTA, record, location);
  const client = clientIn(locationOf(request, env.QUOTA_HOLDER));
  const unused = () => unusedKeyUsage(policy, clock.now());
  return {
    /**
     * What the key list shows: current usage and the days the object holds, in one call to the
     * key's object and none to the location's holder (a page lists up to 100 keys). Today's count
     * may include permits a location holder took and has not used yet (at most its stock, for at
     * most STOCK_LEASE_MS). Unreachable: throws 503.
     */
    listedReportOrThrow: async (): Promise<{ usage: KeyUsage; days: UsageDay[] }> => {
      const withoutLocation = clientIn(null);
      return withoutLocation
        ? withoutLocation.reportOrThrow(policy)
        : { usage: unused(), days: [] };
    },
    /** Current usage; null when the object cannot be reached (the view says so). */
    usage: async (): Promise<KeyUsage | null> => (client ? client.usage(policy) : unused()),
    /** The days the object holds, also written to D1. Unreachable: throws 503. */
    saveUsageHistoryOrThrow: async (): Promise<UsageDay[]> =>
      client ? client.saveUsageHistoryOrThrow() : [],
    /** Lifts the ban, saying when it would have ended. Unreachable: throws 503. */
    unbanOrThrow: async (): Promise<{ bannedUntilBefore: number | null; usage: KeyUsage }> =>
      client ? client.unbanOrThrow(policy) : { bannedUntilBefore: null, usage: unused() },
    /**
     * Makes the record's policy take effect on the key's very next request, in every isolate.
     * Unreachable: throws 503 (the change is saved but not yet enforced).
     */
    pushPolicyOrThrow: async (): Promise<void> => {
      forgetKey(record.id);
      await client?.configureOrThrow(policy);
    },
  };
}
