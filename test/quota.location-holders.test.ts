// The location tier end to end: real QuotaHolder objects (one per key per location) between
// simulated isolates (each with its own LeaseHolder and QuotaLimiterClient) and the key's real
// QuotaLimiter, under fake time. Background work (renewals, hand-backs at expiry, the refill
// when a minute turns) sleeps on clock.sleep, which these tests release as fake time passes
// (background-work.ts: passTime waits for exactly the work it wakes, not for real time).
import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { getKey, policyOf as keyPolicyOf } from "../src/db/keys";
import { MINUTE_MS } from "../src/lib/clock";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import type { AdmitResult } from "../src/objects/quota-holder-client";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { GIVE_BACK_GRACE_MS, heldBound, STOCK_LEASE_MS } from "../src/quota/lease";
import type { Policy } from "../src/quota/windows";
import { backgroundWork, countObjectCalls } from "./background-work";
import {
  ADMIN,
  auth,
  BASE,
  call,
  callWith,
  isolateClientIn,
  issueKey,
  keyDetail,
  MIDNIGHT,
  mockClock,
  policyWith,
  seededRandom as random,
  T0,
} from "./helpers";

const time = mockClock(T0);
let seq = 0;

const { passTime, passTo, uncounted } = backgroundWork(time);

const holderOf = (keyId: string, location: string) =>
  env.QUOTA_HOLDER.getByName(holderName(keyId, location));

/** One simulated isolate in `location`: its own leases, its own client. */
function isolate(keyId: string, location: string, policy: Policy) {
  const { leases, client } = isolateClientIn(keyId, location);
  return {
    leases,
    admit: async (): Promise<AdmitResult> => {
      const result = await client.admit(policy);
      // Run as the Worker runs it: after the response (the test does not wait for it).
      if (result.reached) result.afterResponse?.catch(() => undefined);
      return result;
    },
    giveBack: () =>
      leases.giveBackUnused({ giveBack: (r) => env.QUOTA.getByName(keyId).returnLease(r) }),
  };
}

const admittedIn = (results: AdmitResult[]) =>
  results.filter((r) => {
    expect(r.reached, "every request was decided").toBe(true);
    return r.reached && r.decision.outcome === "allowed";
  }).length;

describe("location holders racing on one key", () => {
  it("4 locations × 4 isolates over 23:58–00:01 UTC never over-admit, strand at most heldBound, and account exactly", {
    timeout: 120_000,
  }, async () => {
    const perMinute = 1_200;
    const perDay = 2_000;
    const policy = policyWith(perMinute, perDay);
    const bound = heldBound(policy); // 120
    const keyId = `holders_race_${++seq}`;
    const locations = ["AMS", "FRA", "SIN", "IAD"];
    const isolates = locations.flatMap((location) =>
      Array.from({ length: 4 }, () => isolate(keyId, location, policy)),
    );
    const next = random(19);
    const STEP_MS = 250;
    const unusedEverywhere = async () => {
      let unused = isolates.reduce((n, iso) => n + iso.leases.unusedPermits, 0);
      for (const location of locations) unused += await holderOf(keyId, location).unusedPermits();
      return unused;
    };
    let admittedToday = 0;
    let mostHeld = 0;

    // 23:58 (the minute binds), 23:59 (the day binds: 800 left), 00:00 (a new day).
    for (const [minute, minuteStart] of [
      MIDNIGHT - 2 * MINUTE_MS,
      MIDNIGHT - MINUTE_MS,
      MIDNIGHT,
    ].entries()) {
      if (minuteStart === MIDNIGHT) admittedToday = 0;
      const room = Math.min(perMinute, perDay - admittedToday);
      let admitted = 0;
      let refused = 0;
      for (let t = 0; t < MINUTE_MS; t += STEP_MS) {
        time.now = minuteStart + t;
        await passTime();
        // The first isolate of each location is busy (≈5 a second: it takes leases of its
        // own), the other three are quiet (≈0.4 a second: their holder decides for them).
        const burst = isolates.flatMap((iso, i) => {
          const sizes = i % 4 === 0 ? [0, 0, 1, 2, 3] : [0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
          return Array.from({ length: sizes[Math.floor(next() * sizes.length)]! }, () =>
            iso.admit(),
          );
        });
        const results = await Promise.all(burst);
        const n = admittedIn(results);
        admitted += n;
        refused += results.length - n;
        expect(admitted, `minute ${minute} at +${t} ms`).toBeLessThanOrEqual(perMinute);
        expect(admittedToday + admitted, `day at minute ${minute}`).toBeLessThanOrEqual(perDay);
        if (t % 5_000 === 0) {
          // Counted by the key's object and not admitted: permits held unused in every tier
          // and location (what isolates and holders still keep of the minute before is no
          // longer counted, nor usable).
          const held = (await usageOf(keyId)).minute.count - admitted;
          expect(held, `held unused at +${t} ms`).toBeGreaterThanOrEqual(0);
          expect(held, `held unused at +${t} ms`).toBeLessThanOrEqual(bound);
          mostHeld = Math.max(mostHeld, held);
        }
      }
      admittedToday += admitted;
      const unused = await unusedEverywhere();
      expect(refused, `minute ${minute}: demand exceeded the room`).toBeGreaterThan(0);
      expect(unused, `minute ${minute}: held unused`).toBeLessThanOrEqual(bound);
      // Under-admission is bounded by what leases hold, all of them together.
      expect(admitted, `minute ${minute}`).toBeGreaterThanOrEqual(room - bound);
      expect(admitted).toBeLessThanOrEqual(room);
      // 23:59's leases cross midnight unreturned: handing them back must not touch the new day.
      if (minute === 1) continue;
      await Promise.all(isolates.map((iso) => iso.giveBack()));
      await Promise.all(locations.map((location) => holderOf(keyId, location).giveBack(keyId)));
      const usage = await usageOf(keyId);
      expect(usage.minute.count, `minute ${minute}: object count = admitted`).toBe(admitted);
      expect(usage.day.count, `minute ${minute}: day count = admitted today`).toBe(admittedToday);
    }
    // Leases and stock were held (the test raced them, not one call per request).
    expect(mostHeld).toBeGreaterThan(0);
  });
});

const usageOf = (keyId: string) => env.QUOTA.getByName(keyId).usage();

describe("a quiet key in one location", () => {
  it.each([
    [1_500, 120, 40],
    [4_000, 45, 15],
  ])(
    "one request every %i ms for 3 minutes waits for the key's object once, and is counted exactly",
    {
      timeout: 60_000,
    },
    async (gapMs, requests, perMinute) => {
      const keyId = `holders_quiet_${++seq}`;
      const policy = policyWith(60, 1_000);
      const holder = holderOf(keyId, "AMS");
      const answers: HolderAnswer[] = [];
      for (let t = 0; t < 3 * MINUTE_MS; t += gapMs) {
        time.now = T0 + t;
        await passTime();
        answers.push(await holder.admit(keyId, policy));
        await passTime(); // the renewal it may have started comes back
      }
      expect(answers).toHaveLength(requests);
      const forwarded = answers.filter((a) => !(a.reached && a.fromStock)).length;
      expect(answers.every((a) => a.reached && a.decision.outcome === "allowed")).toBe(true);
      // Only the first request of all: later ones, in the next minutes too, find stock.
      expect(forwarded).toBe(1);
      await holder.giveBack(keyId);
      const usage = await usageOf(keyId);
      expect(usage.minute.count).toBe(perMinute);
      expect(usage.day.count).toBe(requests);
    },
  );

  it("near its limits, its stock comes back to the key's object 5 s (STOCK_LEASE_MS + GIVE_BACK_GRACE_MS) after the last request", async () => {
    const keyId = `holders_back_${++seq}`;
    // 20 a day: less than MINUTE_STOCK_ROOM_SHARE × heldBound (24) left after any grant, so the
    // stocks are short (a stock for the minute: test/quota.sparse-keys.test.ts).
    const policy = policyWith(60, 20);
    const locations = ["AMS", "FRA", "SIN", "IAD"];
    time.now = T0 + 1_000;
    for (const location of locations) {
      const answer = await holderOf(keyId, location).admit(keyId, policy);
      expect(answer.reached && answer.decision.outcome).toBe("allowed");
    }
    let unused = 0;
    for (const location of locations) unused += await holderOf(keyId, location).unusedPermits();
    // Every location asked for stock; all of them together hold no more than the bound.
    expect(unused).toBeGreaterThan(0);
    expect(unused).toBeLessThanOrEqual(heldBound(policy));
    expect((await usageOf(keyId)).minute.count).toBe(4 + unused);

    expect(STOCK_LEASE_MS + GIVE_BACK_GRACE_MS).toBe(5_000);
    time.now = T0 + 1_000 + 5_000 - 1;
    await passTime();
    expect((await usageOf(keyId)).minute.count).toBe(4 + unused); // not yet expired
    time.now = T0 + 1_000 + 5_000;
    await passTime();
    await passTime();
    for (const location of locations)
      expect(await holderOf(keyId, location).unusedPermits()).toBe(0);
    expect((await usageOf(keyId)).minute.count).toBe(4);
  });
});

/**
 * A key decided at its AMS holder 2 s before a minute ends, then an isolate's lease asked for
 * through that holder (which takes the holder's stock with it).
 */
async function isolateTookTheStock(keyId: string) {
  const policy = policyWith(60, 1_000);
  const holder = holderOf(keyId, "AMS");
  const minuteEnd = T0 + 10 * MINUTE_MS;
  time.now = minuteEnd - 2_000;
  await passTime();
  expect((await holder.admit(keyId, policy)).reached).toBe(true);
  const isolateLease = await holder.admitForIsolate(keyId, policy, { want: 4, returning: [] });
  return { policy, holder, minuteEnd, isolateLease };
}

// One tier at a time holds a key's permits in a location: an isolate whose lease was asked for
// through the holder takes its next minute's lease itself (the holder's stock would be counted as
// used in what it shows), while a request the holder decides after that makes it refill again.
describe("a location holder at the minute's turn", () => {
  it.each([
    ["an isolate's lease asked for through it last: no stock of its own", false],
    ["a request decided there after that: a fresh stock", true],
  ])("%s", async (_what, decidedAfter) => {
    const keyId = `holders_turn_${++seq}`;
    const { policy, holder, minuteEnd, isolateLease } = await isolateTookTheStock(keyId);
    expect(isolateLease.lease?.permits).toBeGreaterThan(0);
    expect(await holder.unusedPermits(), "its stock went back with the isolate's call").toBe(0);
    if (decidedAfter) expect((await holder.admit(keyId, policy)).reached).toBe(true);
    await holder.giveBack(keyId); // the stock that request took: none held before the turn
    time.now = minuteEnd;
    await passTime();
    expect((await holder.unusedPermits()) > 0).toBe(decidedAfter);
  });
});

// A key decided here again after an isolate took the stock is refilled at the turn, by one timer:
// a second one for the same turn (the first request's) finds the refill in flight or its stock
// held, but sends it again once it has failed.
describe("a location holder decided again after an isolate took its stock", () => {
  it.each([
    ["the turn's refill answered", false],
    ["the turn's refill failing", true],
  ])(
    "%s: one timer wakes at the turn, and the key's object gets one refill",
    async (_what, fails) => {
      const keyId = `holders_one_turn_${++seq}`;
      const { policy, holder, minuteEnd } = await isolateTookTheStock(keyId);
      expect((await holder.admit(keyId, policy)).reached).toBe(true);
      await holder.giveBack(keyId); // none held before the turn: the refill has a stock to bring
      const refills = vi.spyOn(QuotaLimiter.prototype, "renewLease");
      if (fails) refills.mockRejectedValueOnce(new Error("the key's object is unreachable"));
      time.now = minuteEnd;
      // Timers for the same turn wake one after another: each after the work of those before.
      let atTheTurn: { wake: () => void }[] = [];
      await passTime((due) => {
        atTheTurn = due.filter((s) => s.at === minuteEnd);
        return due.filter((s) => s.at !== minuteEnd);
      });
      for (const sleep of atTheTurn) {
        sleep.wake();
        await passTime();
      }
      expect(refills, "refills sent to the key's object").toHaveBeenCalledTimes(1);
      expect(atTheTurn, "timers waking at the turn").toHaveLength(1);
      expect((await holder.unusedPermits()) > 0).toBe(!fails);
    },
  );
});

// A stock refilled at the turn waits a minute to go back when no request uses it, and is
// stranded (counted in the key's day, never billed) if the holder is evicted before: a key that
// missed its next request here by more than its gap gets none.
describe("a location holder at the turn of a key that went quiet", () => {
  it.each([
    ["two requests 10 s apart, the last 40 s before the turn: no stock", 40_000, false],
    ["the last 15 s before the turn (one gap late): a fresh stock", 15_000, true],
  ])("%s", async (_what, lastBeforeTurn, refilled) => {
    const keyId = `holders_quiet_${++seq}`;
    const policy = policyWith(20, 40);
    const holder = holderOf(keyId, "AMS");
    const minuteEnd = T0 + 20 * MINUTE_MS;
    time.now = minuteEnd - lastBeforeTurn - 10_000;
    await passTime();
    expect((await holder.admit(keyId, policy)).reached).toBe(true);
    time.now += 10_000;
    expect((await holder.admit(keyId, policy)).reached).toBe(true);
    await holder.giveBack(keyId); // what those requests left: none held before the turn
    expect(await holder.unusedPermits()).toBe(0);
    time.now = minuteEnd;
    await passTime();
    expect((await holder.unusedPermits()) > 0).toBe(refilled);
    expect((await usageOf(keyId)).day.count > 2).toBe(refilled);
  });
});

// A key whose requests come in pairs (a list and a get, a page and the next): its last gap is
// the pair's, its next request comes after the longest of its recent gaps. Judged by the last gap
// alone it went quiet at every turn, and its first request of each minute waited for a far call.
describe("a key whose requests come in pairs 100 ms apart", () => {
  /** `count` pairs `everyMs` apart from `first`: the requests forwarded, and the object's calls. */
  const pairs = async (keyId: string, first: number, everyMs: number, count: number) => {
    const holder = holderOf(keyId, "AMS");
    const policy = policyWith(60, 1_000);
    const objectCalls = countObjectCalls();
    const answers: HolderAnswer[] = [];
    for (let i = 0; i < count; i++) {
      for (const offset of [0, 100]) {
        await passTo(first + i * everyMs + offset);
        answers.push(await holder.admit(keyId, policy));
        await passTime(); // the renewal or ask it may have started comes back
      }
    }
    const calls = objectCalls();
    expect(answers.every((a) => a.reached && a.decision.outcome === "allowed")).toBe(true);
    await holder.giveBack(keyId);
    expect((await usageOf(keyId)).day.count, "the day counts what was admitted").toBe(2 * count);
    const forwarded = answers.flatMap((a, i) => (a.reached && a.fromStock ? [] : [i]));
    return { forwarded, calls };
  };

  it("every 10 s for 3 minutes: only its very first request waits for the key's object", {
    timeout: 60_000,
  }, async () => {
    const { forwarded, calls } = await pairs(`holders_pairs_${++seq}`, T0 + 5_000, 10_000, 18);
    expect(forwarded).toEqual([0]);
    // Its first request, then in each of its 3 minutes a stock of heldBound (6) for its 12
    // requests: the refill at the turn (the first minute: the first request's) and at most two
    // renewals, each once a pair used it up (renewed at the key's last gap, 100 ms).
    expect(calls).toBeLessThanOrEqual(1 + 3 * 3);
  });

  it("every minute for 6 minutes: only the first request of its first two pairs (before its gap between pairs is known) waits for the key's object", {
    timeout: 60_000,
  }, async () => {
    const { forwarded, calls } = await pairs(`holders_pairs_${++seq}`, T0 + 50_000, MINUTE_MS, 6);
    expect(forwarded).toEqual([0, 2]);
    // Those two, the first stock's hand-back, then at each later turn one refill, whose stock
    // lives the minute, and its renewal once the pair used it up (renewed at its last gap).
    expect(calls).toBeLessThanOrEqual(2 + 1 + 2 * 4);
  });

  it("every 10 s, the last pair 40 s before the turn: gone quiet, no stock at the turn", async () => {
    const keyId = `holders_pairs_${++seq}`;
    const policy = policyWith(20, 40);
    const holder = holderOf(keyId, "AMS");
    const minuteEnd = T0 + 30 * MINUTE_MS;
    for (const at of [-50_000, -49_900, -40_000, -39_900]) {
      await passTo(minuteEnd + at);
      expect((await holder.admit(keyId, policy)).reached).toBe(true);
    }
    await holder.giveBack(keyId); // what those requests left: none held before the turn
    expect(await holder.unusedPermits()).toBe(0);
    await passTo(minuteEnd);
    expect(await holder.unusedPermits()).toBe(0);
    expect((await usageOf(keyId)).day.count).toBe(4);
  });
});

describe("a location holder that goes away mid-stock", () => {
  it("strands at most heldBound until its minute ends, admits nothing uncounted, and its next instance starts afresh", async () => {
    const keyId = `holders_evicted_${++seq}`;
    const policy = policyWith(60, 1_000);
    time.now = T0 + 1_000;
    const holder = holderOf(keyId, "AMS");
    expect((await holder.admit(keyId, policy)).reached).toBe(true);
    const stranded = await holder.unusedPermits();
    expect(stranded).toBeGreaterThan(0);
    // Its stock, in memory only, is gone.
    await evictDurableObject(uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS")));

    const fresh = holderOf(keyId, "AMS");
    expect(await fresh.unusedPermits()).toBe(0);
    // The lost stock stays counted (never admitted twice); the next requests are forwarded or
    // served from new stock, within the bound with the lost stock counted.
    let admitted = 1;
    for (let i = 0; i < 80; i++) {
      time.now += 100;
      const answer = await fresh.admit(keyId, policy);
      if (answer.reached && answer.decision.outcome === "allowed") admitted++;
    }
    expect(admitted + stranded).toBeLessThanOrEqual(60);
    expect(admitted).toBeGreaterThanOrEqual(60 - heldBound(policy));
    expect((await usageOf(keyId)).minute.count).toBe(60);
    // The next minute starts from zero: the stranded permits cost only the minute they were in.
    time.now = T0 + MINUTE_MS + 1_000;
    const next = await fresh.admit(keyId, policy);
    expect(next.reached && next.decision.outcome).toBe("allowed");
    await fresh.giveBack(keyId);
    expect((await usageOf(keyId)).minute.count).toBe(1);
  });
});

describe("a key near its limit", () => {
  it("the holders never refuse on their own: the object's 429s, Retry-After and ban stay exact", async () => {
    const keyId = `holders_limit_${++seq}`;
    const policy = policyWith(10, 1_000);
    time.now = T0 + 30_000;
    const answers: HolderAnswer[] = [];
    for (let i = 0; i < 24; i++) {
      answers.push(await holderOf(keyId, i % 2 ? "AMS" : "FRA").admit(keyId, policy));
      await passTime();
    }
    const outcomes = answers.map((a) => (a.reached ? a.decision.outcome : "unreached"));
    expect(outcomes.slice(0, 10)).toEqual(Array(10).fill("allowed"));
    // Refusals 1–10 are rate_limited; the 11th (past max(10, perMinute)) bans the key.
    expect(outcomes.slice(10, 20)).toEqual(Array(10).fill("rate_limited"));
    expect(outcomes.slice(20)).toEqual(Array(4).fill("key_banned"));
    const first = answers[10]!;
    expect(first.reached && "retryAt" in first.decision && first.decision.retryAt).toBe(
      T0 + MINUTE_MS,
    );
    expect((await usageOf(keyId)).minute.count).toBe(10);
  });
});

describe("through the API, requests marked with their location", () => {
  const list = (key: string, colo: string) =>
    call("/v1/pets", { headers: auth(key), cf: { colo } } as RequestInit);

  it("admits exactly 50 of 200 simultaneous requests from 2 locations on a key allowing 50 a minute", {
    timeout: 60_000,
  }, async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 50, perDay: 10_000 });
    time.now = T0 + 5_000;
    const responses = await Promise.all(
      Array.from({ length: 200 }, (_, i) => list(key, i % 2 ? "AMS" : "FRA")),
    );
    const ok = responses.filter((r) => r.status === 200);
    expect(ok).toHaveLength(50);
    const refused = responses.filter((r) => r.status === 429);
    expect(refused).toHaveLength(150);
    const codes = await Promise.all(
      refused.map(async (r) => ((await r.json()) as { code: string }).code),
    );
    expect(new Set(codes)).toEqual(new Set(["rate_limited", "key_banned"]));
    await Promise.all(ok.map((r) => r.arrayBuffer()));
    const detail = (await (await keyDetail(id)).json()) as { usage: { day: { count: number } } };
    expect(detail.usage.day.count).toBe(50);
  });
});

describe("the operator's views, read in a location that holds stock of the key", () => {
  it("the key and its history count only what was admitted: that location's stock goes back first", async () => {
    const name = `stocked-${++seq}`;
    const { id, key } = await issueKey("enterprise", { perMinute: 600, perDay: 10_000 }, { name });
    time.now = T0 + 5_000;
    // Used once (a key never used has no object, and its views read none).
    const first = await call("/v1/pets", { headers: auth(key) });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const policy = keyPolicyOf((await getKey(env.DB, id))!);
    const fra = holderOf(id, "FRA");
    /** One more request admitted at the holder in FRA, which then holds stock of the key. */
    const admitInFra = async () => {
      const answer = await fra.admit(id, policy);
      expect(answer.reached && answer.decision.outcome).toBe("allowed");
      expect(await fra.unusedPermits()).toBeGreaterThan(0);
    };
    const fromFra = async (path: string) => {
      const res = await call(path, { headers: ADMIN, cf: { colo: "FRA" } } as RequestInit);
      expect(res.status).toBe(200);
      return res.json();
    };

    await admitInFra();
    const detail = (await fromFra(`/admin/v1/keys/${id}`)) as { usage: { day: { count: number } } };
    expect(detail.usage.day.count).toBe(2);

    await admitInFra();
    const history = (await fromFra(`/admin/v1/keys/${id}/usage`)) as {
      data: { day: string; admitted: number }[];
    };
    expect(history.data.at(-1)).toMatchObject({
      day: new Date(T0).toISOString().slice(0, 10),
      admitted: 3,
    });
  });
});

describe("a location holder that cannot be reached", () => {
  it("the key's object decides the request itself: counted, with its headers (not failing open)", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 5_000;
    const unreachable = {
      getByName: () => ({
        admit: () => Promise.reject(new Error("the location holder is unreachable")),
      }),
    };
    for (let i = 1; i <= 3; i++) {
      const request = new Request(`${BASE}/v1/pets`, {
        headers: auth(key),
        cf: { colo: "AMS" },
      } as RequestInit);
      const res = await callWith({ QUOTA_HOLDER: unreachable }, request);
      expect(res.status).toBe(200);
      expect(res.headers.get("X-RateLimit-Remaining")).toBe(String(60 - i));
      await res.arrayBuffer();
    }
    const detail = (await (await keyDetail(id)).json()) as { usage: { minute: { count: number } } };
    expect(detail.usage.minute.count).toBe(3);
  });
});

describe("a change to the key", () => {
  it("is pushed to every holder with stock: the next request there is decided by the object under the new policy", async () => {
    const keyId = `holders_change_${++seq}`;
    const v1 = policyWith(60, 1_000);
    const locations = ["AMS", "FRA", "SIN"];
    time.now = T0 + 1_000;
    for (const location of locations) await holderOf(keyId, location).admit(keyId, v1);
    let stocked = 0;
    for (const location of locations)
      if ((await holderOf(keyId, location).unusedPermits()) > 0) stocked++;
    expect(stocked).toBe(3); // every location holds stock, all of it counted
    expect((await usageOf(keyId)).minute.count).toBeGreaterThan(3);

    // Revoked (version 2): the object tells every holder before configure returns.
    await env.QUOTA.getByName(keyId).configure({ ...v1, version: 2, revoked: true });
    await passTime();
    for (const location of locations)
      expect(await holderOf(keyId, location).unusedPermits()).toBe(0);
    // Isolates that still hold version 1 of the key: refused at once, in every location.
    for (const location of locations) {
      const answer = await holderOf(keyId, location).admit(keyId, v1);
      expect(answer.reached && answer.decision.outcome).toBe("revoked");
    }
    expect((await usageOf(keyId)).minute.count).toBe(3); // the stock came back
  });
});
