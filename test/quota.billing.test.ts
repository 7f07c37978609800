// Billing counts what was served: the usage history (and D1, the admin usage API, GET /v1/usage,
// the CSV) reports requests admitted and served; permits leased and never reported used are
// reported apart as `stranded`, never as admitted. Driven against the key's real QuotaLimiter.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { fixClock } from "./helpers";

const POLICY = { perMinute: 1_000, perDay: 100_000, version: 1, revoked: false };
const DAY = Date.UTC(2032, 4, 6);
let seq = 0;

const historyOf = (stub: DurableObjectStub<QuotaLimiter>) =>
  runInDurableObject(stub, (instance: QuotaLimiter) => instance.report(POLICY).days);

describe("the usage history after leases", () => {
  it("a hand-back arriving after the next minute's grant still counts only what was used", async () => {
    const time = fixClock(DAY + 9 * 3_600_000 + 58_000); // 09:00:58
    const stub = env.QUOTA.getByName(`billing-late-${++seq}`);
    const first = await stub.admit(POLICY, { want: 20, returning: [] });
    expect(first.lease?.permits).toBe(20);
    expect(first.lease?.expiresAt).toBe(DAY + 9 * 3_600_000 + MINUTE_MS); // ends with its minute
    // 09:01:00.1: another isolate is granted a lease before the first hands its lease back
    // (GIVE_BACK_GRACE_MS after the expiry).
    time.now = DAY + 9 * 3_600_000 + MINUTE_MS + 100;
    const second = await stub.admit(POLICY, { want: 20, returning: [] });
    expect(second.lease?.permits).toBe(20);
    // The first isolate served 3 requests from its lease; the second is handed back unused.
    await stub.returnLease({ id: first.lease!.id, unused: 17 });
    await stub.returnLease({ id: second.lease!.id, unused: 20 });
    const [day] = await historyOf(stub);
    expect(day?.admitted).toBe(2 + 3);
  });
});
