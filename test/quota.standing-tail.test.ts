// What a key costs after it stops calling in a location: its holder's standing permits (one
// lease per minute to come) and the stock granted with them go back to the key's object in one
// call, not one call each, whatever the key's gap; a hand-back delivered twice is taken back
// once. Driven against the key's real QuotaLimiter and QuotaHolder with fake time, counting
// the key's object's calls.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName, QuotaHolder } from "../src/objects/quota-holder";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import {
  STANDING_BACKGROUND_ENDS_WITHIN_MS,
  STANDING_MINUTES,
  STOPPED_KEY_OBJECT_CALLS,
} from "../src/quota/standing";
import { backgroundWork, countObjectCalls } from "./background-work";
import { fixClock, mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
let seq = 0;

describe("a key that stopped calling in a location", () => {
  const time = mockClock(T0);
  const { passTime, passTo } = backgroundWork(time);
  const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

  /** Sends `requests` requests `gapMs` apart, the first `firstAt` ms into a minute; returns when the last was sent. */
  async function callThenStop(keyId: string, gapMs: number, requests: number, firstAt: number) {
    const holder = holderOf(keyId);
    for (let i = 0; i < requests; i++) {
      await passTo(T0 + firstAt + i * gapMs);
      expect(allowed(await holder.admit(keyId, POLICY))).toBe(true);
      await passTime();
    }
    return time.now;
  }

  it.each([
    // Standing permits for the minutes to come (a gap of 30 s or more): all back in one call.
    [59_000, 7, 7_000, 1],
    [59_000, 7, 45_000, 1],
    [40_000, 8, 7_000, 1],
    [30_000, 6, 29_000, 1],
    [120_000, 4, 59_000, 1],
    [300_000, 3, 45_000, 1],
    // A minute's stock and its refill (every 10 s), a short stock (every 1.5 s and 4 s).
    [10_000, 20, 7_000, STOPPED_KEY_OBJECT_CALLS],
    [10_000, 20, 52_000, STOPPED_KEY_OBJECT_CALLS],
    [1_500, 30, 7_000, STOPPED_KEY_OBJECT_CALLS],
    [4_000, 30, 7_000, STOPPED_KEY_OBJECT_CALLS],
  ])(
    "calling every %i ms (%i requests, the first %i ms into a minute), then stopping: at most %i calls to its object, and everything back",
    { timeout: 60_000 },
    async (gapMs, requests, firstAt, mostCalls) => {
      const keyId = `standing_tail_${++seq}`;
      const last = await callThenStop(keyId, gapMs, requests, firstAt);
      const objectCalls = countObjectCalls();
      await passTo(last + STANDING_BACKGROUND_ENDS_WITHIN_MS);
      expect(await holderOf(keyId).unusedPermits()).toBe(0);
      expect(objectCalls()).toBeLessThanOrEqual(Math.min(mostCalls, STOPPED_KEY_OBJECT_CALLS));
      const after = objectCalls();
      await passTo(last + STANDING_BACKGROUND_ENDS_WITHIN_MS + 5 * MINUTE_MS);
      expect(objectCalls(), "none after the bound").toBe(after);
      // Everything came back: the day counts the requests, billed as admitted, nothing stranded.
      const stub = env.QUOTA.getByName(keyId);
      expect((await stub.usage(POLICY)).day.count).toBe(requests);
      expect((await stub.report(POLICY)).days[0]).toMatchObject({
        admitted: requests,
        stranded: 0,
      });
    },
  );
});

describe("a batched hand-back at the key's object", () => {
  it("takes back every lease in it, and delivered again (the same id) takes back nothing more", async () => {
    const time = fixClock(T0 + 5_000);
    const stub = env.QUOTA.getByName(`standing_tail_${++seq}`);
    const first = await stub.admit(POLICY, { want: 2, returning: [], standing: 1 }, "k@AMS");
    const standing = first.standing ?? [];
    expect(standing.length).toBe(STANDING_MINUTES);
    expect((await stub.usage(POLICY)).day.count).toBe(1 + 2 + STANDING_MINUTES);
    time.now += MINUTE_MS; // the first standing minute has started: its permit is in its window
    const returning = [
      { id: first.lease!.id, unused: 1, used: 1 },
      ...standing.map((s) => ({ id: s.id, unused: 1, used: 0 })),
    ];
    const batch = { returnId: crypto.randomUUID(), returning };
    await stub.returnLeases(batch);
    const once = await stub.usage(POLICY);
    expect(once.day.count, "the request and the one served from the stock").toBe(2);
    expect(once.minute.count).toBe(0);
    // Delivered again (its answer was lost), and after new permits were counted: nothing changes.
    await stub.admit(POLICY, { want: 2, returning: [] }, "k@AMS");
    const before = await stub.usage(POLICY);
    await stub.returnLeases(batch);
    expect(await stub.usage(POLICY)).toEqual(before);
    const [day] = (await stub.report(POLICY)).days;
    expect(day).toMatchObject({ admitted: 3, stranded: 0 });
    // An id remembered, and nothing taken back a second time, whatever the entries say.
    const remembered = await runInDurableObject(
      stub,
      (_: QuotaLimiter, state) =>
        state.storage.sql
          .exec("SELECT COUNT(*) AS n FROM admissions WHERE id = ?", batch.returnId)
          .one().n,
    );
    expect(remembered).toBe(1);
  });
});

// After a lost push, the permits granted under the older version serve nothing new: they go back
// as soon as the holder sees the newer version, not when their minutes are over.
describe("standing permits of an older version of the key", () => {
  const time = mockClock(T0);
  const { passTime, passTo } = backgroundWork(time);
  const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  const revoked = { ...POLICY, version: 2, revoked: true };

  /** A key calling once a minute, its holder holding standing permits; then a change whose push is lost. */
  async function withStandingAndLostPush(keyId: string) {
    const holder = holderOf(keyId);
    for (const at of [T0 + 2_000, T0 + 2_000 + MINUTE_MS]) {
      await passTo(at);
      expect((await holder.admit(keyId, POLICY)).reached).toBe(true);
      await passTime();
    }
    expect(await holder.unusedPermits()).toBeGreaterThanOrEqual(STANDING_MINUTES);
    vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("lost"));
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    await env.QUOTA.getByName(keyId).configure(revoked);
    expect(await holder.unusedPermits(), "the push was lost").toBeGreaterThanOrEqual(
      STANDING_MINUTES,
    );
    return holder;
  }

  it("go back with the request that brings the newer version, in the same call", async () => {
    const keyId = `standing_superseded_${++seq}`;
    const holder = await withStandingAndLostPush(keyId);
    await passTo(T0 + 2 * MINUTE_MS + 2_000);
    const objectCalls = countObjectCalls();
    const answer = await holder.admit(keyId, revoked);
    expect(answer.reached && answer.decision.outcome).toBe("revoked");
    await passTime();
    expect(await holder.unusedPermits()).toBe(0);
    expect(objectCalls(), "no call of their own").toBe(1);
    const stub = env.QUOTA.getByName(keyId);
    expect((await stub.usage(revoked)).day.count, "the two requests admitted").toBe(2);
  });

  it("go back at once when an answer of the key's object carries the newer version", async () => {
    const keyId = `standing_superseded_${++seq}`;
    const holder = await withStandingAndLostPush(keyId);
    // Two requests on the older copy in the next minute: the first is admitted from its standing
    // permit (the push was lost), the second is forwarded and answered under the newer version.
    await passTo(T0 + 2 * MINUTE_MS + 2_000);
    const objectCalls = countObjectCalls();
    const first = await holder.admit(keyId, POLICY);
    expect(first.reached && first.fromStock).toBe(true);
    await passTime();
    const second = await holder.admit(keyId, POLICY);
    expect(second.reached && second.decision.outcome).toBe("revoked");
    await passTime();
    expect(await holder.unusedPermits()).toBe(0);
    expect(objectCalls(), "the forwarded request, then one hand-back").toBeLessThanOrEqual(2);
    const stub = env.QUOTA.getByName(keyId);
    expect((await stub.usage(revoked)).day.count, "the three requests admitted").toBe(3);
  });
});
