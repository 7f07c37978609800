// A key that calls every 10 s or every minute in one location: its holder keeps a stock for the
// rest of each minute while the key is far from its limits (src/quota/lease.ts,
// stockLivesTheMinute), and refills it as the next minute begins, so the key's requests wait for
// no far call; what that stock may cost when the key changes, or nears its limit, stays bounded.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { MINUTE_MS } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import {
  HELD_KEY_EXPECTED_AGE_MS,
  HELD_KEY_READ_AHEAD_GAP_MAX_MS,
} from "../src/objects/holder-key-record";
import { RESTORED_STANDING_MARGIN_MS } from "../src/objects/holder-standing-memory";
import { type HolderAnswer, holderName, QuotaHolder } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import {
  BACKGROUND_ENDS_WITHIN_MS,
  GIVE_BACK_GRACE_MS,
  heldBound,
  minuteStockWanted,
  QUIET_STOCK,
  STOCK_LEASE_MS,
} from "../src/quota/lease";
import { backgroundWork, countObjectCalls } from "./background-work";
import {
  ADMIN,
  alarmOf,
  auth,
  BASE,
  callWith,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  policyWith,
  T0,
} from "./helpers";

const time = mockClock(T0);
const { passTime, passTo, uncounted, evictHolder } = backgroundWork(time);
let seq = 0;

const holderOf = (keyId: string, location: string) =>
  env.QUOTA_HOLDER.getByName(holderName(keyId, location));
const usageOf = (keyId: string) => env.QUOTA.getByName(keyId).usage();
const fromStock = (a: HolderAnswer) => a.reached && a.fromStock;
const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

/** A request of `key` in AMS from an isolate whose record of the key is gone (30 s old). */
const fromColdIsolate = (id: string, key: string) => {
  forgetKey(id);
  return callWith(
    {},
    new Request(`${BASE}/v1/pets?limit=1`, {
      headers: auth(key, { "CF-Connecting-IP": `203.0.113.${++seq % 250}` }),
      cf: { colo: "AMS" },
    } as RequestInit),
  );
};
/** Counts the D1 reads of a key by its secret's hash from now on (the Worker's and holders'). */
function countKeyReads(): () => number {
  let reads = 0;
  const prepare = env.DB.prepare.bind(env.DB);
  vi.spyOn(env.DB, "prepare").mockImplementation((sql: string) => {
    if (sql.includes("FROM retired_key_secrets WHERE key_hash")) reads++;
    return prepare(sql);
  });
  return () => reads;
}
/** D1 no longer finds the key by its secret (a read now answers 401), or finds it again. */
const hideSecret = (id: string, hash: string) =>
  env.DB.prepare("UPDATE api_keys SET key_hash = ?2 WHERE id = ?1").bind(id, hash).run();

describe("a sparse key in one location", () => {
  it.each([
    [10_000, 30],
    [60_000, 6],
  ])(
    "one request every %i ms waits for the key's object on its first request only, with about one background call a minute",
    { timeout: 60_000 },
    async (gapMs, requests) => {
      const keyId = `sparse_${++seq}`;
      const policy = policyWith(60, 1_000);
      const holder = holderOf(keyId, "AMS");
      const objectCalls = countObjectCalls();
      const answers: HolderAnswer[] = [];
      const start = T0 + 7_000;
      for (let i = 0; i < requests; i++) {
        await passTo(start + i * gapMs);
        answers.push(await holder.admit(keyId, policy));
        await passTime();
      }
      expect(answers.every(allowed)).toBe(true);
      // Only the very first request was forwarded: every later one found stock.
      expect(answers.filter((a) => !fromStock(a))).toHaveLength(1);
      const minutes = Math.ceil((requests * gapMs) / MINUTE_MS);
      // The first request, then a refill as each minute begins and a renewal when a stock is half
      // used (a stock of QUIET_STOCK: every other request at 10 s).
      const renewals = gapMs < MINUTE_MS ? Math.ceil(requests / QUIET_STOCK) : 0;
      expect(objectCalls()).toBeLessThanOrEqual(1 + minutes + renewals);
      await holder.giveBack(keyId);
      const usage = await usageOf(keyId);
      expect(usage.day.count, "the day counts exactly what was admitted").toBe(requests);
    },
  );

  it("its stock lives to its minute's end, and goes back with the next minute's refill, or 250 ms after the minute when the key was not used: no background call BACKGROUND_ENDS_WITHIN_MS after the last request", async () => {
    const keyId = `sparse_back_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId, "AMS");
    const minuteStart = T0 - (T0 % MINUTE_MS);
    // Two requests 10 s apart, late in their minute: a key not sparse enough
    // for standing permits (test/quota.standing-permits.test.ts), so the next minute's refill
    // brings the minute's stock only.
    const lastRequest = minuteStart + MINUTE_MS - 10_000;
    await passTo(lastRequest - 10_000);
    expect(allowed(await holder.admit(keyId, policy))).toBe(true);
    await passTo(lastRequest);
    expect(allowed(await holder.admit(keyId, policy))).toBe(true);
    // The first request, forwarded with no gap known here yet, brought a stock of QUIET_STOCK
    // (far from both limits: for the rest of the minute); the second used one of it, and a
    // stock for the minute is renewed only once used up.
    const held = await holder.unusedPermits();
    expect(held).toBe(QUIET_STOCK - 1);
    // Long past a short stock's STOCK_LEASE_MS, the stock is still there.
    await passTo(lastRequest + STOCK_LEASE_MS + GIVE_BACK_GRACE_MS);
    expect(await holder.unusedPermits()).toBe(held);
    expect((await usageOf(keyId)).minute.count).toBe(2 + held);
    // The next minute's refill takes the old stock back and brings a new one: the day counts
    // the requests and the new stock only.
    await passTo(minuteStart + MINUTE_MS + 1_000);
    // Sized to the requests expected in that minute at the key's last gap here (10 s), within
    // heldBound: the key's only holder.
    const refilled = await holder.unusedPermits();
    const nextMinute = minuteStart + MINUTE_MS;
    expect(refilled).toBe(
      Math.min(heldBound(policy), minuteStockWanted(nextMinute, nextMinute + MINUTE_MS, 10_000)),
    );
    expect((await usageOf(keyId)).day.count).toBe(2 + refilled);
    // Not used in that minute: no refill after it, and its stock is back GIVE_BACK_GRACE_MS
    // after the minute's end. Nothing more is called for the key after that.
    const objectCalls = countObjectCalls();
    await passTo(minuteStart + 2 * MINUTE_MS + GIVE_BACK_GRACE_MS);
    expect(await holder.unusedPermits()).toBe(0);
    expect((await usageOf(keyId)).day.count).toBe(2);
    expect(objectCalls()).toBe(1);
    expect(minuteStart + 2 * MINUTE_MS + GIVE_BACK_GRACE_MS).toBeLessThanOrEqual(
      lastRequest + BACKGROUND_ENDS_WITHIN_MS,
    );
    await passTo(minuteStart + 5 * MINUTE_MS);
    expect(objectCalls()).toBe(1);
  });

  it("near its limit its stock is short again: back within 5 s of the last request", async () => {
    const keyId = `sparse_near_${++seq}`;
    // A free key's minute with 20 left: after a stock of 2, less than 4 × heldBound (24).
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId, "AMS");
    const minuteStart = T0 - (T0 % MINUTE_MS);
    await passTo(minuteStart + 1_000);
    for (let i = 0; i < 40; i++) await env.QUOTA.getByName(keyId).admit(policy);
    expect(allowed(await holder.admit(keyId, policy))).toBe(true);
    expect(await holder.unusedPermits()).toBe(QUIET_STOCK);
    await passTo(minuteStart + 1_000 + STOCK_LEASE_MS + GIVE_BACK_GRACE_MS);
    expect(await holder.unusedPermits()).toBe(0);
    expect((await usageOf(keyId)).minute.count).toBe(41);
  });
});

describe("a change to a sparse key", () => {
  it("pushed to its holder: the stock for the minute ends at once", async () => {
    const keyId = `sparse_change_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId, "AMS");
    await passTo(T0 + 2_000);
    expect(allowed(await holder.admit(keyId, policy))).toBe(true);
    await passTo(T0 + 20_000);
    const revoked = { ...policy, version: 2, revoked: true };
    await env.QUOTA.getByName(keyId).configure(revoked);
    expect(await holder.unusedPermits()).toBe(0);
    // An isolate's copy older than the change: forwarded, refused.
    const answer = await holder.admit(keyId, policy);
    expect(answer.reached && answer.decision.outcome).not.toBe("allowed");
    expect(fromStock(answer)).toBe(false);
  });

  it("where the push is lost: at most the stock that holder had, and never past its minute", async () => {
    const keyId = `sparse_lost_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId, "AMS");
    const minuteStart = T0 - (T0 % MINUTE_MS);
    await passTo(minuteStart + 2_000);
    expect(allowed(await holder.admit(keyId, policy))).toBe(true);
    const stock = await holder.unusedPermits();
    expect(stock).toBeGreaterThan(0);
    expect(stock).toBeLessThanOrEqual(heldBound(policy));
    // The push to AMS is lost on its way (a dropped connection).
    const namespace = env.QUOTA_HOLDER;
    const getByName = vi.mocked(namespace.getByName).getMockImplementation()!;
    vi.mocked(namespace.getByName).mockImplementation((name, options) => {
      const stub = getByName(name, options);
      return new Proxy(stub, {
        get: (target, prop) =>
          prop === "keyChanged"
            ? () => Promise.reject(new Error("connection lost"))
            : Reflect.get(target, prop),
      });
    });
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    const revoked = { ...policy, version: 2, revoked: true };
    await env.QUOTA.getByName(keyId).configure(revoked);
    await passTo(minuteStart + 30_000);
    // Requests on a copy from before the change: the stock admits what it holds, and not one
    // more; the next is forwarded and refused.
    const answers: HolderAnswer[] = [];
    for (let i = 0; i <= stock + 1; i++) {
      answers.push(await holder.admit(keyId, policy));
      await passTime();
    }
    expect(answers.filter(allowed).length).toBeLessThanOrEqual(stock);
    const last = answers.at(-1)!;
    expect(last.reached && last.decision.outcome).toBe("revoked");
    // A copy that knows the change never uses the old stock.
    const known = await holder.admit(keyId, revoked);
    expect(known.reached && known.decision.outcome).toBe("revoked");
  });
});

describe("a sparse key's record at its location holder", () => {
  it("is read ahead of the key's next request: a request a minute after the last, from a cold isolate, waits for no D1 read", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const start = T0 - (T0 % MINUTE_MS) + MINUTE_MS + 5_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + MINUTE_MS);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    // The copy read then is read again in the background, HELD_KEY_EXPECTED_AGE_MS before the
    // key's next request is expected (a minute on).
    const readAhead = start + 2 * MINUTE_MS - HELD_KEY_EXPECTED_AGE_MS;
    await passTo(readAhead);
    await hideSecret(id, `moved-${id}`);
    // The next request, a minute after the last: authenticated from that copy, no D1 read (a read
    // would not find the secret now).
    await passTo(start + 2 * MINUTE_MS);
    const third = await fromColdIsolate(id, key);
    expect(third.status).toBe(200);
    expect(third.headers.get("X-RateLimit-Remaining")).toBe("59");
    await hideSecret(id, hash);
  });

  it("is not read ahead for a key calling less often than HELD_KEY_READ_AHEAD_GAP_MAX_MS: its request is decided on the copy, which is read again at once, before the next", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const gap = HELD_KEY_READ_AHEAD_GAP_MAX_MS + 1_000;
    const start = T0 - (T0 % MINUTE_MS) + MINUTE_MS + 5_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + gap);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + 2 * gap - 1_000);
    await hideSecret(id, `moved-${id}`);
    await passTo(start + 2 * gap);
    expect(
      (await fromColdIsolate(id, key)).status,
      "no read ahead: the copy is still the old one",
    ).toBe(200);
    await passTime();
    await passTo(start + 2 * gap + 1_000);
    expect((await fromColdIsolate(id, key)).status, "read again after that request").toBe(401);
    await hideSecret(id, hash);
  });
});

describe("a key calling every 5 minutes, its holder evicted between its requests", () => {
  /** Evicts the key's holder, with the background work it had scheduled. */

  it("is authenticated from the holder's copy of the key, kept with its standing permits: one request waits for no D1 read, and the copy is read again before the next is decided", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const start = T0 - (T0 % MINUTE_MS) + MINUTE_MS + 45_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + 30_000); // the next minute's refill: standing permits
    await evictHolder(id);
    // D1 no longer finds the key by its secret: a request that read it would be answered 401.
    await hideSecret(id, `moved-${id}`);
    await passTo(start + 5 * MINUTE_MS);
    const second = await fromColdIsolate(id, key);
    expect(second.status, "decided on the kept copy, no D1 read first").toBe(200);
    await passTime();
    // That copy was read again after it (the secret is gone now): the next request is refused.
    await passTo(start + 5 * MINUTE_MS + 1_000);
    expect((await fromColdIsolate(id, key)).status).toBe(401);
    await hideSecret(id, hash);
  });

  it("revoked while the push to its holder is lost: at most one request there is decided on the older copy, the next is refused", async () => {
    const { id, key } = await issueKey("free");
    const start = T0 - (T0 % MINUTE_MS) + MINUTE_MS + 45_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + 30_000); // the next minute's refill: standing permits
    await evictHolder(id);
    vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("lost"));
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    const revoked = await callWith({}, `/admin/v1/keys/${id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    expect(revoked.status).toBe(200);
    await passTo(start + 5 * MINUTE_MS);
    expect((await fromColdIsolate(id, key)).status, "the one request on the older copy").toBe(200);
    await passTime();
    await passTo(start + 5 * MINUTE_MS + 1_000);
    await expectError(await fromColdIsolate(id, key), 401, "unauthorized");
  });
  it("answered from its kept standing permits, the holder constructed again leaves their alarm where it was: none moved earlier, to be scheduled before its answer", async () => {
    const { id, key } = await issueKey("free");
    const minute = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
    await passTo(minute + 45_000);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(minute + 75_000); // the next minute's refill: standing permits
    await holderOf(id, "AMS").unusedPermits(); // makes the write the refill owes (`keepOwed`)
    const holder = uncounted(env.QUOTA_HOLDER, holderName(id, "AMS"));
    const before = await alarmOf(holder);
    expect(before, "the alarm that hands them back if the holder is evicted").not.toBeNull();
    await evictHolder(id);
    await passTo(minute + 45_000 + 5 * MINUTE_MS);
    const alarmsSet: number[] = [];
    await runInDurableObject(holder, (_instance, state) => {
      const setAlarm = state.storage.setAlarm.bind(state.storage);
      state.storage.setAlarm = (at, options) => {
        alarmsSet.push(Number(at));
        return setAlarm(at, options);
      };
    });
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    expect(alarmsSet.filter((at) => at < Number(before))).toEqual([]);
  });

  it("changed while the push to its holder is lost, its request forwarded at a minute's edge comes back stale: the holder answers with the D1 read its kept copy started, one read in all", async () => {
    const { id, key } = await issueKey("free");
    const minute = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
    await passTo(minute + 45_000);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(minute + 75_000); // the next minute's refill: standing permits
    await evictHolder(id);
    vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("lost"));
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    expect((await patchKey(id, { plan: "pro" })).status).toBe(200);
    // Within RESTORED_STANDING_MARGIN_MS of its minute's start the kept permit is not usable: the
    // request, on the kept copy (the version before the change), is forwarded and answered stale.
    await passTo(minute + 5 * MINUTE_MS + RESTORED_STANDING_MARGIN_MS / 2);
    const reads = countKeyReads();
    const admits = vi.spyOn(QuotaLimiter.prototype, "admit");
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    expect(admits, "stale, then decided under the key as D1 has it").toHaveBeenCalledTimes(2);
    expect(reads(), "the read the kept copy started, reused after the stale answer").toBe(1);
  });
});

describe("a sparse key's stock for the minute, sized to its requests there", () => {
  it("one request every 10 s in one location: about one call to the key's object a minute (its refill), none per stock", {
    timeout: 60_000,
  }, async () => {
    const keyId = `sized_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId, "AMS");
    const objectCalls = countObjectCalls();
    const minuteStart = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
    const requests = 30;
    const answers: HolderAnswer[] = [];
    for (let i = 0; i < requests; i++) {
      await passTo(minuteStart + 7_000 + i * 10_000);
      answers.push(await holder.admit(keyId, policy));
      await passTime();
    }
    expect(answers.every(allowed)).toBe(true);
    expect(answers.filter((a) => !fromStock(a))).toHaveLength(1);
    // The first request (forwarded), one renewal once the first stock of QUIET_STOCK is used up
    // (the key's gap is known by then), and a refill as each later minute begins: the stock it
    // brings lasts the minute (6 requests, heldBound), so no renewal follows.
    const minutes = Math.ceil((requests * 10_000) / MINUTE_MS);
    expect(objectCalls()).toBeLessThanOrEqual(2 + minutes);
    expect(await holder.unusedPermits()).toBeLessThanOrEqual(heldBound(policy));
    await holder.giveBack(keyId);
    expect((await usageOf(keyId)).day.count, "the day counts exactly what was admitted").toBe(
      requests,
    );
  });

  it("a key with leases in two locations gets QUIET_STOCK in each, and a location new to it waits for stock until the minute ends at most", {
    timeout: 60_000,
  }, async () => {
    const keyId = `shared_${++seq}`;
    const policy = policyWith(60, 1_000);
    const ams = holderOf(keyId, "AMS");
    const fra = holderOf(keyId, "FRA");
    const minuteStart = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
    // AMS alone, every 10 s: the next minute's refill sizes its stock to the whole bound.
    for (let i = 0; i < 8; i++) {
      await passTo(minuteStart + 2_000 + i * 10_000);
      expect(allowed(await ams.admit(keyId, policy))).toBe(true);
      await passTime();
    }
    expect(await ams.unusedPermits()).toBeGreaterThan(QUIET_STOCK);
    // FRA's first request: forwarded (nothing counted there yet); AMS holds the bound.
    await passTo(minuteStart + MINUTE_MS + 25_000);
    const first = await fra.admit(keyId, policy);
    expect(allowed(first) && !fromStock(first)).toBe(true);
    expect((await ams.unusedPermits()) + (await fra.unusedPermits())).toBeLessThanOrEqual(
      heldBound(policy),
    );
    // Both used in the minute: from the next minute's refills on, QUIET_STOCK each, whichever
    // refills first.
    for (let i = 0; i < 9; i++) {
      const at = minuteStart + MINUTE_MS + 30_000 + i * 10_000;
      await passTo(at);
      expect(allowed(await ams.admit(keyId, policy))).toBe(true);
      expect(allowed(await fra.admit(keyId, policy))).toBe(true);
      await passTime();
    }
    await passTo(minuteStart + 3 * MINUTE_MS + 1_000);
    expect(await ams.unusedPermits()).toBeLessThanOrEqual(QUIET_STOCK);
    expect(await fra.unusedPermits()).toBe(QUIET_STOCK);
    const atTurn = await fra.admit(keyId, policy);
    expect(fromStock(atTurn)).toBe(true);
  });
});
