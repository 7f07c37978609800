// A key in use in one location whose stock for the minute holds all of its heldBound, then used
// in a second location (docs/quotas.md, "A key's first request in a new location"): the second
// location's first request is forwarded (nothing was counted there), and its next requests are
// answered from a stock of its own, while the first location keeps admitting from its stock, and
// the permits held unused everywhere stay within heldBound.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName, QuotaHolder } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { heldBound, QUIET_STOCK } from "../src/quota/lease";
import { backgroundWork, countObjectCalls } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);
const { passTime, passTo } = backgroundWork(time);
let seq = 0;

const holderOf = (keyId: string, location: string) =>
  env.QUOTA_HOLDER.getByName(holderName(keyId, location));
const fromStock = (a: HolderAnswer) => a.reached && a.fromStock;
const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

describe("a key's next requests in a location new to it, while another holds the bound", () => {
  it("are answered from a stock of its own: the other location's stock for the minute is trimmed to share the bound", {
    timeout: 30_000,
  }, async () => {
    const keyId = `newloc_${++seq}`;
    const policy = policyWith(60, 1_000);
    const bound = heldBound(policy);
    const ams = holderOf(keyId, "AMS");
    const sin = holderOf(keyId, "SIN");
    const heldEverywhere = async () => (await ams.unusedPermits()) + (await sin.unusedPermits());
    const start = T0 - (T0 % MINUTE_MS) + MINUTE_MS + 2_000;
    // AMS alone, three requests 1.5 s apart (the bench's new-location key): its stock for the
    // minute is sized to the whole bound.
    let admitted = 0;
    for (let i = 0; i < 3; i++) {
      await passTo(start + i * 1_500);
      expect(allowed(await ams.admit(keyId, policy))).toBe(true);
      admitted++;
      await passTime();
    }
    expect(await ams.unusedPermits()).toBe(bound);

    // SIN's first request: forwarded, one far call (nothing was counted for SIN).
    let at = start + 2 * 1_500 + 1_000;
    await passTo(at);
    const first = await sin.admit(keyId, policy);
    expect(allowed(first) && !fromStock(first)).toBe(true);
    admitted++;
    await passTime();
    expect(await heldEverywhere()).toBeLessThanOrEqual(bound);
    // AMS was asked to share: it handed its stock back and took a shared one; SIN asked for its own.
    expect(await ams.unusedPermits()).toBeLessThanOrEqual(QUIET_STOCK);
    expect(await sin.unusedPermits()).toBe(QUIET_STOCK);

    // SIN's next requests, 1 s apart, and AMS's: each answered from its own location's stock.
    const objectCalls = countObjectCalls();
    for (let i = 0; i < QUIET_STOCK; i++) {
      at += 1_000;
      await passTo(at);
      const callsBefore = objectCalls();
      const next = await sin.admit(keyId, policy);
      expect(allowed(next) && fromStock(next), `SIN's request ${i + 2}`).toBe(true);
      expect(objectCalls(), "no call to the key's object before its answer").toBe(callsBefore);
      const there = await ams.admit(keyId, policy);
      expect(allowed(there) && fromStock(there), `AMS's request ${i + 4}`).toBe(true);
      admitted += 2;
      await passTime();
      expect(await heldEverywhere()).toBeLessThanOrEqual(bound);
    }

    // Nothing over-admitted, nothing lost: once both hand back, the day counts what was admitted.
    await ams.giveBack(keyId);
    await sin.giveBack(keyId);
    await passTime();
    const usage = await env.QUOTA.getByName(keyId).usage();
    expect(usage.day.count).toBe(admitted);
    expect(usage.minute.count).toBe(admitted);
  });
});

describe("a key's next request in a location new to it, sent while the bound is being shared", () => {
  it("waits for the location's own stock, on its way, instead of a far call; the sharing costs one push and one refill", {
    timeout: 30_000,
  }, async () => {
    const keyId = `newloc_${++seq}`;
    const policy = policyWith(60, 1_000);
    const bound = heldBound(policy);
    const ams = holderOf(keyId, "AMS");
    const sin = holderOf(keyId, "SIN");
    const start = T0 - (T0 % MINUTE_MS) + MINUTE_MS + 2_000;
    for (let i = 0; i < 3; i++) {
      await passTo(start + i * 1_500);
      expect(allowed(await ams.admit(keyId, policy))).toBe(true);
      await passTime();
    }
    expect(await ams.unusedPermits()).toBe(bound);

    // AMS answers the key's object's push only once let go: the sharing is under way meanwhile.
    const { promise: held, resolve: letGo } = Promise.withResolvers<void>();
    const pushes: string[] = [];
    const restock = QuotaHolder.prototype.restock;
    vi.spyOn(QuotaHolder.prototype, "restock").mockImplementation(async function (
      this: QuotaHolder,
      ...args: Parameters<QuotaHolder["restock"]>
    ) {
      pushes.push("restock");
      await held;
      return restock.apply(this, args);
    });
    const calls: string[] = [];
    for (const method of ["admit", "renewLease"] as const) {
      const original = QuotaLimiter.prototype[method];
      vi.spyOn(QuotaLimiter.prototype, method).mockImplementation(function (
        this: QuotaLimiter,
        ...args: unknown[]
      ) {
        calls.push(method);
        return (original as (...a: unknown[]) => unknown).apply(this, args);
      } as never);
    }

    // SIN's first request: forwarded (nothing was counted for SIN).
    await passTo(start + 4_000);
    const first = await sin.admit(keyId, policy);
    expect(allowed(first) && !fromStock(first)).toBe(true);
    // Its next one, right after the answer, before AMS has answered the push.
    const next = sin.admit(keyId, policy);
    await new Promise((resolve) => setTimeout(resolve, 20));
    letGo();
    const answer = await next;
    await passTime();
    expect(allowed(answer) && fromStock(answer), "answered from SIN's own stock").toBe(true);
    // One forwarded request (the first), SIN's refill, and one push (to AMS), nothing else: AMS
    // kept a shared stock of what it held, with no call of its own.
    expect(calls).toEqual(["admit", "renewLease"]);
    expect(pushes).toEqual(["restock"]);
    expect(await ams.unusedPermits()).toBe(QUIET_STOCK);
    expect((await ams.unusedPermits()) + (await sin.unusedPermits())).toBeLessThanOrEqual(bound);

    // Nothing over-admitted: what AMS gave up was counted back, and once both hand back, the
    // windows count what was admitted (3 in AMS, 2 in SIN).
    expect(allowed(await ams.admit(keyId, policy))).toBe(true);
    await ams.giveBack(keyId);
    await sin.giveBack(keyId);
    await passTime();
    const usage = await env.QUOTA.getByName(keyId).usage();
    expect(usage.minute.count).toBe(6);
    expect(usage.day.count).toBe(6);
  });
});
