// A location holder reports what its standing permits served with its next call to the key's
// object: a forwarded request's, or a renewal's. Those reports stay in the holder's storage until
// the key's object has answered a call carrying them: when that call fails and the holder is then
// evicted (its memory lost), the hand-back at their end (the alarm's) carries them, so the
// requests they served are billed as admitted, not stranded; when the failed call had reached the
// object, the reports delivered again are counted once.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { policyOf } from "../src/db/keys";
import { MINUTE_MS } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import { HELD_KEY_MAX_AGE_MS } from "../src/objects/holder-key-record";
import type { KeptStanding } from "../src/objects/holder-standing-memory";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import {
  type HolderAnswer,
  type HolderAuthentication,
  holderName,
} from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import type { ReturnedLease } from "../src/quota/lease-messages";
import { StandingStock } from "../src/quota/standing-stock";
import type { WindowStatus } from "../src/quota/windows";
import { backgroundWork } from "./background-work";
import { alarmOf, issueKey, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, uncounted, evictHolder } = backgroundWork(time);
let seq = 0;

const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
const holderStubOf = (keyId: string) => uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS"));
const fromStock = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed" && a.fromStock;

/** Evicts the key's holder from memory, with the background work it had scheduled. */

type Lost = "before the object acted" | "after the object acted";

/**
 * Watches the calls of `method` to the key's object that carry reports of served requests:
 * `carried` gets the ids of those reports; with `failFirst`, the first such call fails, lost
 * before or after the object acted on it (`failed` counts it).
 */
function watchReportingCalls(method: "admit" | "renewLease", failFirst: Lost | "none") {
  const carried: string[] = [];
  let failed = 0;
  const original = QuotaLimiter.prototype[method] as (...args: unknown[]) => unknown;
  vi.spyOn(QuotaLimiter.prototype, method).mockImplementation(async function (
    this: QuotaLimiter,
    ...args: unknown[]
  ) {
    const { returning = [] } = (args[1] ?? {}) as { returning?: ReturnedLease[] };
    const reports = returning.filter((r) => r.used > 0).map((r) => r.id);
    carried.push(...reports);
    if (failFirst === "none" || failed > 0 || reports.length === 0)
      return original.apply(this, args);
    failed++;
    if (failFirst === "after the object acted") await original.apply(this, args);
    throw new Error("the key's object is unreachable");
  } as never);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  return { carried, failed: () => failed };
}

/**
 * The first call of `method` to the key's object carrying a report of served requests fails,
 * lost before or after the object acted on it. Returns how many such calls failed.
 */
const failFirstReportingCall = (method: "admit" | "renewLease", lost: Lost) =>
  watchReportingCalls(method, lost).failed;

/** Calls of `method` to the key's object are answered again (after `failFirstReportingCall`). */
const answerAgain = (method: "admit" | "renewLease") =>
  (QuotaLimiter.prototype[method] as unknown as { mockRestore(): void }).mockRestore();

/** Runs the holder's alarm, evicted, until it sets none (it hands back what it kept). */
async function runAlarmsEvicted(keyId: string) {
  for (let i = 0; i < 10; i++) {
    const at = await alarmOf(holderStubOf(keyId));
    if (at === null) return;
    await evictHolder(keyId);
    await passTo(Math.max(time.now, at));
    await runDurableObjectAlarm(holderStubOf(keyId));
    await passTime();
  }
  throw new Error("the holder's alarm never stopped");
}

/** The key's day as billed once its holder, evicted, has handed back what it kept (its alarm). */
async function billedOnceHandedBack(keyId: string) {
  await evictHolder(keyId);
  await runAlarmsEvicted(keyId);
  return billed(keyId);
}

/** The key's day as billed, once everything not handed back is settled as stranded. */
async function billed(keyId: string) {
  time.now += STRANDED_AFTER_MS + MINUTE_MS;
  const [day] = (await env.QUOTA.getByName(keyId).report(POLICY)).days;
  return day;
}

/**
 * A sparse key's start at its holder: its first request, then the next minute's refill brings
 * standing permits. Returns the holder, when the key started, and the answers it served.
 */
async function startedSparse(keyId: string) {
  const holder = holderOf(keyId);
  const start = T0 + 45_000;
  await passTo(start);
  const served: HolderAnswer[] = [await holder.admit(keyId, POLICY, null, "first")];
  await passTo(start + 30_000); // the next minute's refill brings standing permits
  return { holder, start, served };
}

/**
 * `startedSparse`, then its holder evicted and the key back 5 minutes on with requests `ids`,
 * each answered from a standing permit kept across the eviction.
 */
async function servedFromKeptPermits(keyId: string, ids: string[]) {
  const started = await startedSparse(keyId);
  await evictHolder(keyId);
  await passTo(started.start + 5 * MINUTE_MS);
  for (const id of ids) {
    started.served.push(await started.holder.admit(keyId, POLICY, null, id));
    await passTime();
  }
  expect(started.served.slice(1).every(fromStock), "answered from standing permits").toBe(true);
  return started;
}

describe.each<Lost>(["before the object acted", "after the object acted"])(
  "a standing permits' report whose call fails, lost %s, its holder then evicted",
  (lost) => {
    it("carried by a forwarded request's call: the requests the permits served are billed admitted", async () => {
      const keyId = `reports_forwarded_${++seq}`;
      // A key calling every 5 minutes, its holder evicted in between: two requests 5 minutes on, one
      // 10 minutes on, each answered from a standing permit.
      const { holder, start, served } = await servedFromKeptPermits(keyId, ["five", "five-again"]);
      await evictHolder(keyId);
      await passTo(start + 10 * MINUTE_MS);
      served.push(await holder.admit(keyId, POLICY, null, "ten"));
      await passTime();
      expect(fromStock(served.at(-1)!), "answered from a standing permit").toBe(true);
      // The minute's permit used up, the next request is forwarded with the reports: that call fails.
      const failed = failFirstReportingCall("admit", lost);
      const forwarded = await holder.admit(keyId, POLICY, null, "forwarded");
      expect(failed(), "the forwarded call carried the reports, and failed").toBe(1);
      expect(forwarded.reached).toBe(false);
      // The Worker asks the key's object itself, with the request's admission id.
      const asked = await env.QUOTA.getByName(keyId).admit(POLICY, {
        want: 0,
        returning: [],
        admissionId: "forwarded",
      });
      expect(asked.outcome).toBe("allowed");
      const day = await billedOnceHandedBack(keyId);
      expect(day?.admitted, "every request served, billed admitted once").toBe(served.length + 1);
    });

    it("carried by an isolate's call through the holder, which takes over the stock: the requests the permits served are billed admitted", async () => {
      const keyId = `reports_isolate_${++seq}`;
      const { holder, served } = await servedFromKeptPermits(keyId, ["five"]);
      // An isolate asks for a lease of its own: the holder hands everything back in that call.
      const failed = failFirstReportingCall("admit", lost);
      const request = { want: 4, returning: [], admissionId: "isolate" };
      await expect(holder.admitForIsolate(keyId, POLICY, request)).rejects.toThrow();
      expect(failed(), "the isolate's call carried the reports, and failed").toBe(1);
      const asked = await env.QUOTA.getByName(keyId).admit(POLICY, { ...request, want: 0 });
      expect(asked.outcome).toBe("allowed");
      const day = await billedOnceHandedBack(keyId);
      expect(day?.admitted, "every request served, billed admitted once").toBe(served.length + 1);
    });

    it("carried by a renewal: the requests the permits served are billed admitted", async () => {
      const keyId = `reports_renewal_${++seq}`;
      const { holder, start, served } = await startedSparse(keyId);
      // A key calling once a minute from the minute after (the refill's stock, for this one, lives in
      // memory only): answered from standing permits, reported with the renewal that asks for more
      // once they would not cover its next request.
      const failed = failFirstReportingCall("renewLease", lost);
      for (let i = 2; i <= 12 && failed() === 0; i++) {
        await passTo(start + i * MINUTE_MS);
        served.push(await holder.admit(keyId, POLICY, null, `minute-${i}`));
        await passTime();
      }
      expect(failed(), "a renewal carried the reports, and failed").toBe(1);
      expect(served.slice(1).every(fromStock), "answered from standing permits").toBe(true);
      const day = await billedOnceHandedBack(keyId);
      expect(day?.admitted, "every request served, billed admitted once").toBe(served.length);
    });
  },
);

describe("a standing permits' report carried by a request the key's object has decided before", () => {
  it("is taken back all the same: the requests the permits served are billed admitted", async () => {
    const keyId = `reports_known_${++seq}`;
    const { holder, served } = await servedFromKeptPermits(keyId, ["five", "five-again"]);
    // The Worker asked the key's object itself (the holder's answer late), then the holder's call
    // for the same request, carrying the reports, arrives: the object answers it as before.
    const asked = await env.QUOTA.getByName(keyId).admit(POLICY, {
      want: 0,
      returning: [],
      admissionId: "late",
    });
    expect(asked.outcome).toBe("allowed");
    const late = await holder.admit(keyId, POLICY, null, "late");
    expect(late.reached && !late.fromStock, "forwarded, with the reports").toBe(true);
    const day = await billedOnceHandedBack(keyId);
    expect(day?.admitted, "every request served, billed admitted once").toBe(served.length + 1);
  });
});

describe("standing permits' reports kept after their call failed and the holder was evicted", () => {
  it("go back with the next hand-back the key asks of the holder (a usage read's), not only at the permits' end", async () => {
    const keyId = `reports_usage_${++seq}`;
    const { holder, start, served } = await servedFromKeptPermits(keyId, ["five", "five-again"]);
    const failed = failFirstReportingCall("admit", "before the object acted");
    const forwarded = await holder.admit(keyId, POLICY, null, "forwarded");
    expect({ failed: failed(), reached: forwarded.reached }).toEqual({ failed: 1, reached: false });
    answerAgain("admit");
    // The Worker asks the key's object itself, then the holder is evicted.
    await env.QUOTA.getByName(keyId).admit(POLICY, {
      want: 0,
      returning: [],
      admissionId: "forwarded",
    });
    await evictHolder(keyId);
    // A usage read in this location while the permits still stand hands back what the holder has.
    await passTo(start + 5 * MINUTE_MS + 5_000);
    await holder.giveBack(keyId);
    await passTime();
    const [day] = (await env.QUOTA.getByName(keyId).report(POLICY)).days;
    expect(day?.admitted, "served here, and the request the key's object decided").toBe(
      served.length + 1,
    );
  });

  it("an isolate's call taking over the location's permits lost: a copy of the key older than HELD_KEY_MAX_AGE_MS is no longer used once stale (no permit left to use)", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const holder = holderOf(id);
    const start = T0 + 45_000;
    await passTo(start);
    const first = (await holder.authenticateAndAdmit(
      id,
      hash,
      `${id}-first`,
    )) as HolderAuthentication;
    if (first.outcome !== "found") throw new Error(`the key was ${first.outcome}`);
    await passTo(start + 30_000); // the next minute's refill brings standing permits
    await passTo(start + 2 * MINUTE_MS);
    const second = (await holder.authenticateAndAdmit(
      id,
      hash,
      `${id}-second`,
    )) as HolderAuthentication;
    expect(second.outcome === "found" && second.answer?.reached && second.answer.fromStock).toBe(
      true,
    );
    await passTime();
    // The isolate's call carries the permits' reports, so none is usable; the call is lost.
    const failed = failFirstReportingCall("admit", "before the object acted");
    const taken = holder.admitForIsolate(id, policyOf(first.match.record), {
      want: 4,
      returning: [],
    });
    await expect(taken).rejects.toThrow();
    expect(failed()).toBe(1);
    answerAgain("admit");
    // The key's secret changes in D1 and no push reaches the holder; its copy grows old.
    await env.DB.prepare("UPDATE api_keys SET key_hash = ?2 WHERE id = ?1")
      .bind(id, `changed-${id}`)
      .run();
    await passTo(time.now + HELD_KEY_MAX_AGE_MS + 1_000);
    const later = (await holder.authenticateAndAdmit(
      id,
      hash,
      `${id}-later`,
    )) as HolderAuthentication;
    expect(later.outcome, "read from D1, where the secret is no longer known").toBe("unknown");
  });
});

describe("a standing permit kept by the release before (no answers kept), reported, its request asked again", () => {
  const windows: WindowStatus[] = [
    { name: "minute", limit: 60, remaining: 50, resetAt: T0 + MINUTE_MS, seconds: 60 },
    { name: "day", limit: 1_000, remaining: 900, resetAt: T0 + 86_400_000, seconds: 86_400 },
  ];
  it("is answered with the remaining it was first answered with, its own use counted", () => {
    const now = T0 + 1_000;
    const before = new StandingStock();
    before.add([{ id: "p", permits: 3, minuteStart: T0 }], 1, T0, T0, T0);
    const first = before.take(1, now, "a", windows);
    const kept = before.held().map(({ answers: _, ...h }) => h);
    const stock = new StandingStock();
    stock.restore(kept, 0);
    expect(stock.answeredBefore("a", 1, windows)).toEqual(first);
    stock.reports(now, { all: true });
    expect(stock.answeredBefore("a", 1, windows), "asked again once reported").toEqual(first);
  });
});

/** The ids of the standing permits the key's holder keeps in its storage. */
const keptIds = (keyId: string) =>
  runInDurableObject(holderStubOf(keyId), (_instance, state) =>
    (state.storage.kv.get<KeptStanding>("standing")?.standing ?? []).map((s) => s.id),
  );

/** The reports `carried` were of permits kept `before` the call, and are kept no more. */
async function expectKeptNoMore(keyId: string, before: string[], carried: string[]) {
  expect(carried.length, "the call carried reports").toBeGreaterThan(0);
  expect(before, "the reported permits were kept before the call").toEqual(
    expect.arrayContaining(carried),
  );
  const kept = await keptIds(keyId);
  expect(
    kept.filter((id) => carried.includes(id)),
    "reported permits still kept",
  ).toEqual([]);
}

describe("standing permits whose reports a call answered carried", () => {
  it("a forwarded request's call: the holder keeps them no more", async () => {
    const keyId = `reports_answered_${++seq}`;
    await servedFromKeptPermits(keyId, ["five", "five-again"]);
    const before = await keptIds(keyId);
    const { carried } = watchReportingCalls("admit", "none");
    const forwarded = await holderOf(keyId).admit(keyId, POLICY, null, "forwarded");
    await passTime();
    expect(forwarded.reached && !forwarded.fromStock, "forwarded").toBe(true);
    await expectKeptNoMore(keyId, before, carried);
  });

  it("an isolate's call through the holder, which takes over the stock: the holder keeps them no more", async () => {
    const keyId = `reports_isolate_answered_${++seq}`;
    await servedFromKeptPermits(keyId, ["five"]);
    const before = await keptIds(keyId);
    const { carried } = watchReportingCalls("admit", "none");
    const admission = await holderOf(keyId).admitForIsolate(keyId, POLICY, {
      want: 4,
      returning: [],
      admissionId: "isolate",
    });
    await passTime();
    expect(admission.outcome).toBe("allowed");
    await expectKeptNoMore(keyId, before, carried);
  });
});
