// Standing permits (src/quota/standing.ts): a location holder's permits for each of the next few
// minutes, granted by the key's object in one call. Counted in the day at the grant and in each
// minute's window as that minute starts, held towards that minute's heldBound, pushed a change to,
// billed as served only once reported used and as stranded only if never reported: driven against
// the key's real QuotaLimiter with fake time.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { type HolderAnswer, holderName, QuotaHolder } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { heldBound, QUIET_STOCK } from "../src/quota/lease";
import type { StandingPermit } from "../src/quota/lease-messages";
import {
  STANDING_BACKGROUND_ENDS_WITHIN_MS,
  STANDING_MINUTES,
  STANDING_MOST_MINUTES,
  STANDING_REQUESTS_AHEAD,
} from "../src/quota/standing";
import { StandingStock } from "../src/quota/standing-stock";
import { backgroundWork, countObjectCalls, freezeBackgroundWork } from "./background-work";
import { fixClock, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const DAY = Date.UTC(2032, 4, 7);
const NINE = DAY + 9 * 3_600_000;
let seq = 0;

const newLimiter = () => env.QUOTA.getByName(`standing-${++seq}`);
const historyOf = (stub: DurableObjectStub<QuotaLimiter>) =>
  runInDurableObject(stub, (instance: QuotaLimiter) => instance.report(POLICY).days);

describe("standing permits at the key's object", () => {
  it("are granted to a location holder for each of the next minutes, counted in the day at once and in each minute as it starts", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const first = await stub.admit(POLICY, { want: 0, returning: [], standing: 1 }, "k@AMS");
    expect(first.outcome).toBe("allowed");
    const standing = first.standing ?? [];
    expect(standing.map((s) => s.minuteStart)).toEqual(
      Array.from({ length: STANDING_MINUTES }, (_, i) => NINE + (i + 1) * MINUTE_MS),
    );
    // The request, and every standing permit in the day; only the request in this minute.
    let usage = await stub.usage(POLICY);
    expect(usage.day.count).toBe(1 + STANDING_MINUTES);
    expect(usage.minute.count).toBe(1);
    // Two minutes on, that minute's standing permit is in its window before any request.
    time.now = NINE + 2 * MINUTE_MS + 1_000;
    expect((await stub.usage(POLICY)).minute.count, "shown before any call in that minute").toBe(1);
    const later = await stub.admit(POLICY);
    expect(later.windows.find((w) => w.name === "minute")?.remaining).toBe(60 - 1 - 1);
    usage = await stub.usage(POLICY);
    expect(usage.minute.count).toBe(2);
    // An isolate (no holder name) is granted none.
    const isolate = await stub.admit(POLICY, { want: 0, returning: [], standing: 1 });
    expect(isolate.standing).toBeUndefined();
  });

  it("a minute's standing permits and its other leases together stay within heldBound", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    const bound = heldBound(POLICY);
    const granted: StandingPermit[][] = [];
    for (let i = 0; i < bound + 2; i++) {
      const a = await stub.admit(POLICY, { want: 0, returning: [], standing: 1 }, `k@L${i}`);
      granted.push(a.standing ?? []);
    }
    expect(granted.slice(0, bound).every((g) => g.length === STANDING_MINUTES)).toBe(true);
    expect(granted.slice(bound).every((g) => g.length === 0)).toBe(true);
    // Asked again, a holder gets none for the minutes it holds already.
    const again = await stub.admit(POLICY, { want: 0, returning: [], standing: 1 }, "k@L0");
    expect(again.standing).toBeUndefined();
  });

  it("are granted only far from the limits: the first minutes that leave the room a stock for the minute needs, none without it", async () => {
    fixClock(NINE + 5_000);
    const stub = newLimiter();
    // 29 left in the day after the request: 4 × heldBound (24) left after 5 standing permits.
    const tight = policyWith(60, 30);
    const a = await stub.admit(tight, { want: 0, returning: [], standing: 1 }, "k@AMS");
    expect(a.outcome).toBe("allowed");
    expect(a.standing?.map((s) => s.minuteStart)).toEqual(
      Array.from({ length: 5 }, (_, i) => NINE + (i + 1) * MINUTE_MS),
    );
    expect((await stub.usage(tight)).day.count).toBe(1 + 5);
    // 24 left: none.
    const b = await stub.admit(tight, { want: 0, returning: [], standing: 1 }, "k@FRA");
    expect(b.outcome).toBe("allowed");
    expect(b.standing).toBeUndefined();
    expect((await stub.usage(tight)).day.count).toBe(2 + 5);
  });

  it("one handed back unused gives the day back and bills nothing; one used is billed admitted; one never reported is stranded once its holder's last minute is over", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const a = await stub.admit(POLICY, { want: 0, returning: [], standing: 1 }, "k@AMS");
    const [m1, m2, ...rest] = a.standing ?? [];
    // Minute 1's permit used, minute 2's not: reported together after both minutes.
    time.now = NINE + 3 * MINUTE_MS + 1_000;
    await stub.returnLease({ id: m1!.id, unused: 0, used: 1, admissionIds: [] });
    await stub.returnLease({ id: m2!.id, unused: 1, used: 0 });
    const usage = await stub.usage(POLICY);
    expect(usage.day.count, "the request, m1's use, and the minutes still standing").toBe(
      2 + rest.length,
    );
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 2, stranded: 0 });
    // Still waited for: not stranded before the holder's last standing minute is over.
    const lastEnd = Math.max(...rest.map((s) => s.minuteStart)) + MINUTE_MS;
    time.now = lastEnd + STRANDED_AFTER_MS - 1;
    await stub.admit(POLICY);
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 3, stranded: 0 });
    time.now = lastEnd + STRANDED_AFTER_MS;
    await stub.admit(POLICY);
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 4, stranded: rest.length });
  });

  it("a report whose used count takes in the same admission id twice counts that request once: the extra permit goes back unused", async () => {
    const time = fixClock(NINE + 5_000);
    const stub = newLimiter();
    const a = await stub.admit(POLICY, { want: 0, returning: [], standing: 2 }, "k@AMS");
    const [m1, m2, ...rest] = a.standing ?? [];
    expect(m1?.permits).toBe(2);
    time.now = NINE + 3 * MINUTE_MS + 1_000;
    // m1: one request asked again of a holder that took a second permit for it; m2: one request
    // asked again, the second permit taken from a later report of another permit.
    await stub.returnLease({ id: m1!.id, unused: 0, used: 2, admissionIds: ["twice", "twice"] });
    await stub.returnLease({ id: m2!.id, unused: 1, used: 1, admissionIds: ["once"] });
    const [m3] = rest;
    await stub.returnLease({ id: m3!.id, unused: 1, used: 1, admissionIds: ["once"] });
    // Delivered again: nothing changes.
    await stub.returnLease({ id: m1!.id, unused: 0, used: 2, admissionIds: ["twice", "twice"] });
    const usage = await stub.usage(POLICY);
    expect(usage.day.count, "the first request, two served, and the minutes still standing").toBe(
      3 + 2 * (rest.length - 1),
    );
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 3, stranded: 0 });
  });

  it("a change to the key is pushed to a holder holding standing permits only for minutes to come", async () => {
    fixClock(NINE + 59_000);
    const stub = newLimiter();
    const told = vi.spyOn(QuotaHolder.prototype, "keyChanged").mockResolvedValue(undefined);
    await stub.admit(POLICY, { want: 0, returning: [], standing: 1 }, "k@AMS");
    await stub.configure({ ...POLICY, version: 2 });
    expect(told).toHaveBeenCalledTimes(1);
  });
});

// The holder's side, with the file's clock and background work (renewals, refills, hand-backs).
describe("a location holder's standing permits", () => {
  const time = mockClock(T0);
  const { passTime, passTo, uncounted, evictHolder } = backgroundWork(time);

  /**
   * Evicts the key's holder from memory, with the background work it had scheduled. (Work woken
   * from here, not by the holder's own timers, writes its storage at the holder's next call: the
   * call to `unusedPermits` first.)
   */

  const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  const fromStock = (a: HolderAnswer) => a.reached && a.fromStock;
  const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

  /** A key calling once a minute here from `start`: after its second request, standing permits. */
  async function sparseKeyWithStanding(keyId: string, start = T0 + 2_000) {
    const holder = holderOf(keyId);
    for (const at of [start, start + MINUTE_MS]) {
      await passTo(at);
      expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
      await passTime();
    }
    return holder;
  }

  it("a request admitted from a standing permit whose answer was lost, then asked of the key's object with its admission id, is counted and billed once", async () => {
    const keyId = `standing_retry_${++seq}`;
    const holder = await sparseKeyWithStanding(keyId);
    await passTo(T0 + 2_000 + 2 * MINUTE_MS);
    const lost = await holder.admit(keyId, POLICY, null, "lost-answer");
    expect(allowed(lost) && fromStock(lost), "admitted from its standing permit").toBe(true);
    // The isolate never heard it: it asks the key's object with the same id.
    const stub = env.QUOTA.getByName(keyId);
    const asked = await stub.admit(POLICY, { want: 0, returning: [], admissionId: "lost-answer" });
    expect(asked.outcome).toBe("allowed");
    await passTo(time.now + STANDING_BACKGROUND_ENDS_WITHIN_MS);
    expect(await holder.unusedPermits()).toBe(0);
    expect((await stub.usage(POLICY)).day.count, "three requests served").toBe(3);
    expect((await stub.report(POLICY)).days[0]).toMatchObject({ admitted: 3, stranded: 0 });
  });

  it("a request admitted from a standing permit whose answer was lost, asked again with its admission id after its holder was evicted, is answered from the same permit and counted once", async () => {
    const keyId = `standing_restarted_${++seq}`;
    const holder = holderOf(keyId);
    // A key calling every 40 s here: two standing permits a minute.
    const start = T0 + 2_000;
    for (const at of [start, start + 40_000]) {
      await passTo(at);
      expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
      await passTime();
    }
    await passTo(start + 80_000);
    const first = await holder.admit(keyId, POLICY, null, "answer-lost");
    expect(allowed(first) && fromStock(first), "admitted from its standing permit").toBe(true);
    await passTime();
    // The permit it was taken from is kept with its admission id, one permit still unused.
    const holderStub = uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS"));
    const kept = await runInDurableObject(holderStub, (_: QuotaHolder, state) =>
      state.storage.kv.get<{ standing: { left: number; admissionIds: string[] }[] }>("standing"),
    );
    const takenFrom = kept?.standing.find((s) => s.admissionIds.includes("answer-lost"));
    expect(takenFrom?.left, "one permit left beside the one taken").toBe(1);
    // The holder is evicted before the Worker asks again with the same admission id.
    await evictHolder(keyId);
    const unused = await holder.unusedPermits();
    time.now += 2_000;
    const again = await holder.admit(keyId, POLICY, null, "answer-lost");
    expect(again, "the same answer").toEqual({
      ...first,
      decision: first.reached && { ...first.decision, now: time.now },
    });
    expect(await holder.unusedPermits(), "no second permit taken").toBe(unused);
    // Once the key stops: three requests served, billed admitted three.
    await passTo(time.now + STANDING_BACKGROUND_ENDS_WITHIN_MS);
    time.now += STRANDED_AFTER_MS;
    const [day] = (await env.QUOTA.getByName(keyId).report(POLICY)).days;
    expect(day?.admitted, "requests served").toBe(3);
  });

  it.each([
    // The next minute's refill (the key sent one request in the minute before), then one call per
    // STANDING_MINUTES requests; at one every 5 minutes, one per request.
    // (59 s: a key calling about once a minute, its gaps a little under it.)
    // Its first request early in a minute (the refill then finds it 30 s old or more), or late.
    [59_000, 13, 3, 7_000],
    [300_000, 4, 5, 7_000],
    [59_000, 13, 3, 45_000],
    [300_000, 4, 5, 45_000],
  ])(
    "a key calling every %i ms: every request after its first is answered in its location with no call to its object; %i requests, at most %i background calls (first at %i ms into a minute)",
    { timeout: 60_000 },
    async (gapMs, requests, mostCalls, firstAt) => {
      const keyId = `standing_holder_${++seq}`;
      const start = T0 + firstAt;
      const holder = holderOf(keyId);
      await passTo(start);
      expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
      await passTime();
      const objectCalls = countObjectCalls();
      const answers: HolderAnswer[] = [];
      for (let i = 1; i <= requests; i++) {
        await passTo(start + i * gapMs);
        answers.push(await holder.admit(keyId, POLICY));
        await passTime();
      }
      expect(answers.every(allowed)).toBe(true);
      expect(answers.every(fromStock), "no request waits for the key's object").toBe(true);
      expect(objectCalls()).toBeLessThanOrEqual(mostCalls);
      // Once the key stops: everything goes back within the bound, and the day counts exactly
      // what was admitted (unused standing permits do not eat it), billed as admitted, nothing
      // stranded.
      const last = time.now;
      await passTo(last + STANDING_BACKGROUND_ENDS_WITHIN_MS);
      expect(await holder.unusedPermits()).toBe(0);
      const after = objectCalls();
      await passTo(last + STANDING_BACKGROUND_ENDS_WITHIN_MS + 5 * MINUTE_MS);
      expect(objectCalls(), "no background call after the bound").toBe(after);
      const stub = env.QUOTA.getByName(keyId);
      expect((await stub.usage(POLICY)).day.count).toBe(requests + 1);
      const [day] = (await stub.report(POLICY)).days;
      expect(day).toMatchObject({ admitted: requests + 1, stranded: 0 });
    },
  );

  it("a key calling every 5 minutes, once started (its first two requests), costs one call to its object per STANDING_REQUESTS_AHEAD requests: its grants span that many of its gaps", async () => {
    const keyId = `standing_horizon_${++seq}`;
    const holder = holderOf(keyId);
    const start = T0 + 20_000;
    const gapMs = 5 * MINUTE_MS;
    const answers: HolderAnswer[] = [];
    let objectCalls = () => 0;
    for (let i = 0; i <= 2 + 2 * STANDING_REQUESTS_AHEAD; i++) {
      await passTo(start + i * gapMs);
      // Its first request is forwarded; from the third on, counted.
      if (i === 2) objectCalls = countObjectCalls();
      answers.push(await holder.admit(keyId, POLICY));
      await passTime();
    }
    expect(answers.every(allowed)).toBe(true);
    expect(answers.slice(1).every(fromStock), "no request waits for the key's object").toBe(true);
    expect(objectCalls(), `calls for ${2 * STANDING_REQUESTS_AHEAD + 1} requests`).toBe(2);
    // Once it stops: everything goes back within the bound, nothing billed but what was admitted.
    const last = time.now;
    await passTo(last + STANDING_BACKGROUND_ENDS_WITHIN_MS);
    expect(await holder.unusedPermits()).toBe(0);
    const [day] = (await env.QUOTA.getByName(keyId).report(POLICY)).days;
    expect(day).toMatchObject({ admitted: answers.length, stranded: 0 });
  });

  it("a holder evicted between a key's requests every 5 minutes keeps its standing permits: each request is answered there, and an alarm hands them back after the last", async () => {
    const keyId = `standing_kept_${++seq}`;
    const holder = holderOf(keyId);
    const start = T0 + 45_000;
    await passTo(start);
    expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
    await passTo(start + 30_000); // the next minute's refill: standing permits
    const objectCalls = countObjectCalls();
    const answers: HolderAnswer[] = [];
    for (let i = 1; i <= 3; i++) {
      await evictHolder(keyId);
      await passTo(start + i * 5 * MINUTE_MS);
      answers.push(await holder.admit(keyId, POLICY));
      await passTime();
    }
    expect(answers.every(allowed)).toBe(true);
    expect(answers.every(fromStock), "no request waits for the key's object").toBe(true);
    expect(objectCalls(), "one background call per request").toBeLessThanOrEqual(3);
    // Evicted again after the last request: the alarm just after the last standing minute hands
    // them back; the day counts what was admitted, and strands only the stock granted at the
    // first refill (put aside to go back with the next call, and lost with the holder's memory).
    await evictHolder(keyId);
    const holderStub = uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS"));
    const alarmAt = await runInDurableObject(holderStub, (_: QuotaHolder, state) =>
      state.storage.getAlarm(),
    );
    expect(alarmAt).toBeLessThanOrEqual(
      start + 3 * 5 * MINUTE_MS + STANDING_BACKGROUND_ENDS_WITHIN_MS,
    );
    // The bound counts that alarm: it fires no later after the last minute granted ends than
    // STANDING_BACKGROUND_ENDS_WITHIN_MS allows after the furthest minute a grant can reach.
    const lastMinuteEnds = await runInDurableObject(
      uncounted(env.QUOTA, keyId),
      (_: QuotaLimiter, state) =>
        Number(state.storage.sql.exec("SELECT MAX(minute_start) AS m FROM leases").one().m) +
        MINUTE_MS,
    );
    expect((alarmAt ?? 0) - lastMinuteEnds).toBeLessThanOrEqual(
      STANDING_BACKGROUND_ENDS_WITHIN_MS - (STANDING_MOST_MINUTES + 2) * MINUTE_MS,
    );
    await passTo(alarmAt ?? 0);
    expect(await runDurableObjectAlarm(holderStub)).toBe(true);
    await passTime();
    expect(await holder.unusedPermits()).toBe(0);
    expect(
      await runInDurableObject(holderStub, (_: QuotaHolder, state) => state.storage.getAlarm()),
    ).toBeNull();
    time.now += STRANDED_AFTER_MS;
    const stub = env.QUOTA.getByName(keyId);
    const [day] = (await stub.report(POLICY)).days;
    expect(day?.admitted).toBe(4);
    expect(day?.stranded).toBeLessThanOrEqual(QUIET_STOCK);
    expect((await stub.usage(POLICY)).day.count).toBe(4 + (day?.stranded ?? 0));
  });

  /** The next hand-back call to the key's object (`returnLease` or `returnLeases`) fails. */
  function failNextHandBack(): () => number {
    let failures = 1;
    for (const method of ["returnLease", "returnLeases"] as const) {
      const original = QuotaLimiter.prototype[method];
      vi.spyOn(QuotaLimiter.prototype, method).mockImplementation(function (
        this: QuotaLimiter,
        ...args: unknown[]
      ) {
        if (failures-- > 0) throw new Error("the key's object is unreachable");
        return (original as (...a: unknown[]) => unknown).apply(this, args);
      } as never);
    }
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    return () => 1 - Math.max(0, failures);
  }

  it.each([
    ["evicted before their end: the alarm's", "alarm"],
    ["in memory at their end: its own", "in memory"],
  ])(
    "a hand-back of standing permits, the holder %s, that fails once is made again by the alarm, the holder evicted in between: the requests they served are billed admitted",
    async (_what, failing) => {
      const keyId = `standing_hand_back_failed_${++seq}`;
      const holder = holderOf(keyId);
      const start = T0 + 45_000;
      await passTo(start);
      expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
      await passTo(start + 30_000); // the next minute's refill: standing permits
      const answers: HolderAnswer[] = [];
      for (let i = 1; i <= 2; i++) {
        await evictHolder(keyId);
        await passTo(start + i * 5 * MINUTE_MS);
        answers.push(await holder.admit(keyId, POLICY));
        await passTime();
      }
      expect(answers.every(fromStock), "served from the standing permits").toBe(true);
      const holderStub = uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS"));
      const alarmOf = () =>
        runInDurableObject(holderStub, (_: QuotaHolder, state) => state.storage.getAlarm());
      const alarmAt = (await alarmOf()) ?? 0;
      let failed = () => 0;
      if (failing === "alarm") {
        await evictHolder(keyId);
        await passTo(alarmAt);
        failed = failNextHandBack();
        expect(await runDurableObjectAlarm(holderStub)).toBe(true);
        await passTime();
      } else {
        failed = failNextHandBack();
        await passTo(alarmAt - 1); // its own hand-back, 250 ms after their end
      }
      expect(failed(), "the hand-back was made and failed").toBe(1);
      const retryAt = await alarmOf();
      await evictHolder(keyId);
      await passTo(Math.max(time.now, retryAt ?? 0));
      const ranAgain = await runDurableObjectAlarm(holderStub);
      await passTime();
      time.now += STRANDED_AFTER_MS;
      const [day] = (await env.QUOTA.getByName(keyId).report(POLICY)).days;
      // The first request was decided by the key's object; the two since, from standing permits.
      expect(day?.admitted, "requests served").toBe(3);
      expect(ranAgain, "the alarm ran again").toBe(true);
      expect(await holder.unusedPermits()).toBe(0);
      expect(await alarmOf()).toBeNull();
    },
  );

  it("a key calling every 5 minutes, its holder evicted between requests and the object's answers 50 ms on their way back: no refill at the minute after a request, one background call per request", async () => {
    // The answers carry the object's time; 50 ms later they arrive (a far round trip's way back),
    // so each standing permit is usable from 50 ms into its minute, and one kept across an
    // eviction from 1,050 ms (RESTORED_STANDING_MARGIN_MS).
    const add = StandingStock.prototype.add;
    vi.spyOn(StandingStock.prototype, "add").mockImplementation(function (
      this: StandingStock,
      granted,
      version,
      answeredAt,
      sentAt,
      receivedAt,
    ) {
      add.call(this, granted, version, answeredAt, sentAt, receivedAt + 50);
    });
    const keyId = `standing_refill_${++seq}`;
    const holder = holderOf(keyId);
    const start = T0 + 45_000;
    await passTo(start);
    expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
    await passTo(start + 30_000); // the next minute's refill: standing permits
    const objectCalls = countObjectCalls();
    const answers: HolderAnswer[] = [];
    for (let i = 1; i <= 3; i++) {
      await evictHolder(keyId);
      const at = start + i * 5 * MINUTE_MS;
      await passTo(at);
      answers.push(await holder.admit(keyId, POLICY));
      await passTime();
      // The holder stays in memory past the next minute's start: its refill would fire then.
      await passTo(at - (at % MINUTE_MS) + MINUTE_MS + 2_000);
    }
    expect(answers.every(fromStock), "no request waits for the key's object").toBe(true);
    expect(objectCalls(), "the ask for standing permits only, no refill").toBeLessThanOrEqual(3);
  });

  it("a key's first request in a location asks for none, nor do keys calling more often than every 30 s", async () => {
    const keyId = `standing_quiet_${++seq}`;
    const holder = holderOf(keyId);
    await passTo(T0 + 2_000);
    expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
    await passTime();
    const first = await holder.unusedPermits();
    for (let i = 1; i <= 5; i++) {
      await passTo(T0 + 2_000 + i * 10_000);
      expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
      await passTime();
    }
    // The minute's stock only (at most heldBound), nothing for minutes to come.
    expect(first).toBeLessThanOrEqual(heldBound(POLICY));
    expect((await env.QUOTA.getByName(keyId).usage(POLICY)).day.count).toBeLessThanOrEqual(
      6 + heldBound(POLICY),
    );
  });

  it("a change pushed to the holder ends its standing permits at once; a request on the new version never uses them", async () => {
    const keyId = `standing_change_${++seq}`;
    const holder = await sparseKeyWithStanding(keyId);
    expect(await holder.unusedPermits()).toBeGreaterThanOrEqual(STANDING_MINUTES);
    const lower = { ...POLICY, perMinute: 30, version: 2 };
    await env.QUOTA.getByName(keyId).configure(lower);
    await passTime();
    expect(await holder.unusedPermits()).toBe(0);
    await passTo(T0 + 2 * MINUTE_MS + 2_000);
    const answer = await holder.admit(keyId, lower);
    expect(allowed(answer)).toBe(true);
    expect(fromStock(answer), "decided by the key's object under the new policy").toBe(false);
    expect(answer.reached && answer.decision.windows[0]?.limit).toBe(30);
  });

  it("where the push is lost, a request on a copy of the key with the change (at most 30 s old) is forwarded, not admitted from the old standing permits", async () => {
    const keyId = `standing_lost_${++seq}`;
    const holder = await sparseKeyWithStanding(keyId);
    expect(await holder.unusedPermits()).toBeGreaterThanOrEqual(STANDING_MINUTES);
    // The push never reaches the holder.
    vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("lost"));
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    const revoked = { ...POLICY, version: 2, revoked: true };
    await env.QUOTA.getByName(keyId).configure(revoked);
    await passTo(T0 + 2 * MINUTE_MS + 2_000);
    const answer = await holder.admit(keyId, revoked);
    expect(fromStock(answer)).toBe(false);
    expect(answer.reached && answer.decision.outcome).toBe("revoked");
  });

  it("a holder lost with its standing permits: they are stranded once its last minute is over, at most STANDING_MINUTES plus its stock", async () => {
    const keyId = `standing_evicted_${++seq}`;
    const holder = await sparseKeyWithStanding(keyId);
    const held = await holder.unusedPermits();
    expect(held).toBeGreaterThanOrEqual(STANDING_MINUTES);
    // Background work never runs from here on: as if the holder were gone.
    freezeBackgroundWork();
    time.now = T0 + (STANDING_MINUTES + 3) * MINUTE_MS + STRANDED_AFTER_MS;
    const stub = env.QUOTA.getByName(keyId);
    await stub.admit(POLICY);
    // The key's object decided the first request and this one; the second, served from the
    // holder's stock and never reported, is stranded with what the holder held.
    const [day] = (await stub.report(POLICY)).days;
    expect(day).toMatchObject({ admitted: 2, stranded: held + 1 });
    expect(held).toBeLessThanOrEqual(STANDING_MINUTES + heldBound(POLICY));
  });
});
