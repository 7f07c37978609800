import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, evictHolder } = backgroundWork(time);
let seq = 0;

const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
const fromStock = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed" && a.fromStock;
const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

describe("a location holder asked again its own admission id after an eviction", () => {
  it("serves each standing permit granted with it once: every request served is billed admitted once", async () => {
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const keyId = `own_id_evicted_${++seq}`;
    const holder = holderOf(keyId);
    const served: HolderAnswer[] = [];
    await passTo(T0 + 45_000);
    served.push(await holder.admit(keyId, POLICY, null, "first"));
    // The next minute's refill fails (the key's object unreachable): no standing permits from it.
    const renew = vi.spyOn(QuotaLimiter.prototype, "renewLease").mockImplementation(() => {
      throw new Error("the key's object is unreachable");
    });
    await passTo(T0 + 61_000);
    renew.mockRestore();
    // 90 s on, in the minute after: forwarded, granted a stock and standing permits with it.
    const sparse = vi.spyOn(QuotaLimiter.prototype, "admit");
    await passTo(T0 + 135_000);
    served.push(await holder.admit(keyId, POLICY, null, "second"));
    const granted = (await sparse.mock.results.at(-1)?.value)?.standing ?? [];
    sparse.mockRestore();
    expect(granted.length, "standing permits granted with the forwarded request").toBeGreaterThan(
      0,
    );
    // Its answer lost on the way to the isolate, the holder evicted; the isolate asks again.
    await evictHolder(keyId);
    const again = await holder.admit(keyId, POLICY, null, "second");
    expect(allowed(again)).toBe(true);
    await passTime();
    // The first minute of those permits: three requests there.
    const minute = granted[0].minuteStart as number;
    const inMinute: HolderAnswer[] = [];
    for (let i = 0; i < 3; i++) {
      await passTo(minute + 5_000 + i * 1_000);
      inMinute.push(await holder.admit(keyId, POLICY, null, `m-${i}`));
    }
    served.push(...inMinute);
    expect(
      inMinute.filter(fromStock).length,
      "some answered from that minute's permit",
    ).toBeGreaterThan(0);
    // Everything back (the holder's end of its permits), then the day as billed.
    await passTo(time.now + 40 * MINUTE_MS);
    await passTime();
    time.now += STRANDED_AFTER_MS + MINUTE_MS;
    const [day] = (await env.QUOTA.getByName(keyId).report(POLICY)).days;
    expect(day?.admitted, "every request served, billed admitted once").toBe(
      served.filter(allowed).length,
    );
  });
});
