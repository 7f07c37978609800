import { unusableKeyError, whyKeyUnusable } from "../auth/api-key";
import { pushPolicyOrThrow } from "../auth/push-policy";
import { type KeyRecord, markKeyUsed } from "../db/keys";
import { clock } from "../lib/clock";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";

// Keys this isolate has marked used: its cached record of the key may say "never used" for up to
// the key cache's lifetime, and one mark per key is all D1 needs.
const markedHere = new ExpiringMap<string, true>(10_000);

/**
 * A key's quota object exists only once the key is used, and D1 says so first: the admin views
 * of a key D1 has never seen used answer zeros without creating the object (which would create
 * it near the operator, not near the key's consumer). So the first request of a key marks it used
 * (`first_used_at`) alongside its admission, and the request's answer waits for both: a request
 * whose answer has been sent is always in the admin views. An admin read running at the same time
 * as that very first request may see it or not, like any read racing a write.
 *
 * Null when the key is marked already (in D1, or by this isolate). A mark that fails is logged
 * and tried again by the key's next request.
 *
 * An admin change that finds the key unused pushes nothing to its (absent) object. If this
 * request's record of the key is older than such a change, the object would be created with the
 * old policy: the mark returns the key as D1 has it, and a newer version is pushed to the object
 * here, before the answer. If that version may no longer be used (revoked, disabled, expired),
 * this request is refused too (throws its 401), as the push would have refused it.
 */
export function markFirstUseOrThrow(env: Env, key: KeyRecord): Promise<void> | null {
  if (key.firstUsedAt !== null) return null;
  const now = clock.now();
  if (markedHere.get(key.id, now)) return null;
  return markKeyUsed(env.DB, key.id, now).then(
    async (current) => {
      markedHere.set(key.id, true, Infinity);
      if (!current || current.version <= key.version) return;
      await pushPolicyOrThrow(env, current).catch((err: unknown) =>
        log("warn", "a newer policy found at a key's first use was not pushed", {
          keyId: key.id,
          error: String(err),
        }),
      );
      const problem = whyKeyUnusable(current, clock.now());
      if (problem) throw unusableKeyError(problem);
    },
    (err: unknown) =>
      log("warn", "could not mark a key used; its next request tries again", {
        keyId: key.id,
        error: String(err),
      }),
  );
}
