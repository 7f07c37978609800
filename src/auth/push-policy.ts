import { type KeyRecord, policyOf } from "../db/keys";
import { QuotaLimiterClient } from "../objects/quota-limiter-client";
import { forgetKey } from "./key-cache";

/**
 * Makes the key as written (`record`) take effect on its very next request, in every isolate:
 * this isolate forgets its copy, and the key's quota object is told (it tells the location
 * holders). A key never used has no object to tell: its first request brings the policy along
 * (middleware/first-use.ts). Unreachable object: throws 503, the change saved but not enforced.
 */
export async function pushPolicyOrThrow(env: Env, record: KeyRecord): Promise<void> {
  forgetKey(record.id);
  if (record.firstUsedAt === null) return;
  await new QuotaLimiterClient(env.QUOTA, record).configureOrThrow(policyOf(record));
}
