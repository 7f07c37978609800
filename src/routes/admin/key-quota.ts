import { type KeyRecord, policyOf } from "../../db/keys";
import type { UsageDay } from "../../db/usage-history";
import { clock } from "../../lib/clock";
import { locationOf, type RequestLocation } from "../../objects/quota-holder-client";
import { QuotaLimiterClient, unusedKeyUsage } from "../../objects/quota-limiter-client";
import type { KeyUsage } from "../../quota/windows";

/**
 * The client of the key's quota object, or null for a key never used (`firstUsedAt` null): such
 * a key has no object, its first request creates it in the location it is first used from, so
 * the admin API's reads of it answer zeros and create none.
 */
function clientOfUsedKey(
  env: Env,
  record: KeyRecord,
  location: RequestLocation | null,
): QuotaLimiterClient | null {
  return record.firstUsedAt === null ? null : new QuotaLimiterClient(env.QUOTA, record, location);
}

/**
 * A key's quota object as the admin API reads it, for the key as `record` has it (see
 * clientOfUsedKey for a key never used). Reads first hand back what this isolate and the
 * request's location hold of the key, so they are exact as far as this location goes.
 *
 * @example
 * const usage = await adminKeyQuota(c.env, c.req.raw, record).usage(); // null if unreachable
 */
export function adminKeyQuota(env: Env, request: Request, record: KeyRecord) {
  const policy = policyOf(record);
  const client = clientOfUsedKey(env, record, locationOf(request, env.QUOTA_HOLDER));
  const unused = () => unusedKeyUsage(policy, clock.now());
  return {
    /** Current usage; null when the object cannot be reached (the view says so). */
    usage: async (): Promise<KeyUsage | null> => (client ? client.usage(policy) : unused()),
    /** The days the object holds, also written to D1. Unreachable: throws 503. */
    saveUsageHistoryOrThrow: async (): Promise<UsageDay[]> =>
      client ? client.saveUsageHistoryOrThrow() : [],
    /** Lifts the ban, saying when it would have ended. Unreachable: throws 503. */
    unbanOrThrow: async (): Promise<{ bannedUntilBefore: number | null; usage: KeyUsage }> =>
      client ? client.unbanOrThrow(policy) : { bannedUntilBefore: null, usage: unused() },
  };
}

/**
 * What the key list shows of a key: current usage and the days the object holds, in one call to
 * the key's object and none to the location's holder (a page lists up to 100 keys). Today's count
 * may include permits a location holder took and has not used yet (at most its stock, for at
 * most STOCK_LEASE_MS, or to its minute's end for a key far from its limits). Unreachable: throws
 * 503.
 */
export async function listedKeyReportOrThrow(
  env: Env,
  record: KeyRecord,
): Promise<{ usage: KeyUsage; days: UsageDay[] }> {
  const policy = policyOf(record);
  const client = clientOfUsedKey(env, record, null);
  return client
    ? client.reportOrThrow(policy)
    : { usage: unusedKeyUsage(policy, clock.now()), days: [] };
}
