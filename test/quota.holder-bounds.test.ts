// The two bounds docs/quotas.md states for the location tier, tested at their edges with real
// QuotaHolder objects and the key's real QuotaLimiter under fake time:
// - permits held unused, every holder and isolate together: at most heldBound, and back in the
//   key's object within 5 s (STOCK_LEASE_MS + GIVE_BACK_GRACE_MS) of a location's last request;
// - a change to the key reaches every holder before the admin API answers (waiting at most
//   PUSH_DEADLINE_MS for them), and a holder it does not reach stops admitting from its stock
//   when its lease ends (fails closed).
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { PUSH_DEADLINE_MS } from "../src/objects/stock-sharing";
import { GIVE_BACK_GRACE_MS, heldBound, QUIET_STOCK, STOCK_LEASE_MS } from "../src/quota/lease";
import type { Policy } from "../src/quota/windows";
import { backgroundWork } from "./background-work";
import { mockClock, T0 } from "./helpers";

const time = mockClock(T0);
const { passTime } = backgroundWork(time);
let seq = 0;

const LOCATIONS = ["AMS", "FRA", "SIN", "IAD"];
const policyOf = (perMinute: number, extra: Partial<Policy> = {}): Policy => ({
  perMinute,
  perDay: 10_000,
  version: 1,
  revoked: false,
  ...extra,
});
const holderOf = (keyId: string, location: string) =>
  env.QUOTA_HOLDER.getByName(holderName(keyId, location));
const countOf = async (keyId: string) => (await env.QUOTA.getByName(keyId).usage()).minute.count;
const unusedIn = (keyId: string, location: string) => holderOf(keyId, location).unusedPermits();
const outcomeOf = (answer: HolderAnswer) =>
  answer.reached ? answer.decision.outcome : "unreached";
const fromStock = (answer: HolderAnswer) => answer.reached && answer.fromStock;

describe("permits held unused across locations", () => {
  it("four locations share heldBound: three get their stock, the fourth forwards every request", async () => {
    const keyId = `bounds_shared_${++seq}`;
    const policy = policyOf(60); // heldBound 6: room for three stocks of 2
    expect(heldBound(policy)).toBe(3 * QUIET_STOCK);
    time.now = T0 + 1_000;
    for (const location of LOCATIONS)
      expect(outcomeOf(await holderOf(keyId, location).admit(keyId, policy))).toBe("allowed");
    const unused = await Promise.all(LOCATIONS.map((location) => unusedIn(keyId, location)));
    expect(unused).toEqual([QUIET_STOCK, QUIET_STOCK, QUIET_STOCK, 0]);
    // Counted: the four requests and the three stocks, nothing else.
    expect(await countOf(keyId)).toBe(4 + heldBound(policy));

    // The fourth location is answered by the key's object, one request at a time: exact.
    for (let i = 0; i < 3; i++) {
      time.now += 100;
      const answer = await holderOf(keyId, "IAD").admit(keyId, policy);
      expect(outcomeOf(answer)).toBe("allowed");
      expect(fromStock(answer), "IAD's requests are forwarded").toBe(false);
    }
    expect(await unusedIn(keyId, "IAD")).toBe(0);
    expect(await countOf(keyId)).toBe(7 + heldBound(policy));
  });

  it("a location's short stock (a key near its limits) is back in the key's object within 5 s of its last request, renewals included", async () => {
    const keyId = `bounds_back_${++seq}`;
    // 26 a day: after any grant, less than MINUTE_STOCK_ROOM_SHARE × heldBound (24) left, so
    // every stock is short (a stock for the minute: test/quota.sparse-keys.test.ts).
    const policy = policyOf(60, { perDay: 26 });
    time.now = T0 + 1_000;
    let admitted = 0;
    const admit = async (location: string) => {
      const answer = await holderOf(keyId, location).admit(keyId, policy);
      expect(outcomeOf(answer)).toBe("allowed");
      admitted++;
      await passTime(); // a renewal the request started comes back
      return answer;
    };
    await admit("FRA"); // used once, at T0 + 1 s
    // AMS is used every 1.5 s for 12 s: its stock is renewed (each renewal: STOCK_LEASE_MS more).
    let lastAms = 0;
    let fromAmsStock = 0;
    for (let t = 1_000; t <= 13_000; t += 1_500) {
      time.now = T0 + t;
      await passTime();
      if (fromStock(await admit("AMS"))) fromAmsStock++;
      lastAms = time.now;
    }
    expect(fromAmsStock, "AMS answered from a renewed stock").toBeGreaterThan(4);

    // FRA's stock (not renewed) was back STOCK_LEASE_MS + GIVE_BACK_GRACE_MS after its request.
    expect(await unusedIn(keyId, "FRA")).toBe(0);
    expect(await unusedIn(keyId, "AMS")).toBeGreaterThan(0);
    expect(await countOf(keyId)).toBeGreaterThan(admitted);
    expect((await countOf(keyId)) - admitted).toBeLessThanOrEqual(heldBound(policy));

    expect(STOCK_LEASE_MS + GIVE_BACK_GRACE_MS).toBeLessThanOrEqual(5_000);
    for (let t = lastAms; t <= lastAms + 5_000; t += 50) {
      time.now = t;
      await passTime();
    }
    expect(await unusedIn(keyId, "AMS"), "AMS's stock 5 s after its last request").toBe(0);
    expect(await countOf(keyId), "counted once everything is back").toBe(admitted);
  });
});

describe("a change to the key reaches every location", () => {
  /** Gives each location's holder its stock (under `policy`); returns the requests admitted. */
  async function stockEverywhere(keyId: string, policy: Policy): Promise<number> {
    for (const location of LOCATIONS)
      expect(outcomeOf(await holderOf(keyId, location).admit(keyId, policy))).toBe("allowed");
    for (const location of LOCATIONS) expect(await unusedIn(keyId, location)).toBe(QUIET_STOCK);
    return LOCATIONS.length;
  }

  it("a plan change: before configure answers, every holder stops admitting from its stock; the next request in each is decided by the object under the new plan", async () => {
    const keyId = `changes_plan_${++seq}`;
    const v1 = policyOf(100); // heldBound 10: a stock of 2 in each of the 4 locations
    time.now = T0 + 1_000;
    const admitted = await stockEverywhere(keyId, v1);
    // The plan goes down to 6 a minute: 4 admitted, so 2 more.
    await env.QUOTA.getByName(keyId).configure({ ...v1, perMinute: 6, version: 2 });
    // Requests from isolates that still hold version 1 of the key, no background work run.
    const answers: HolderAnswer[] = [];
    for (const location of LOCATIONS) {
      time.now += 10;
      answers.push(await holderOf(keyId, location).admit(keyId, v1));
    }
    expect(answers.map(fromStock), "answered from stock").toEqual([false, false, false, false]);
    expect(answers.map((a) => a.reached && a.decision.policyVersion)).toEqual([2, 2, 2, 2]);
    expect(answers.map(outcomeOf)).toEqual(["allowed", "allowed", "rate_limited", "rate_limited"]);
    await passTime();
    expect(await countOf(keyId), "the stocks came back").toBe(admitted + 2);
  });

  it("a revocation with one holder not answering: configure answers after PUSH_DEADLINE_MS, the others stop at once, and that one when its short stock's lease ends (fails closed)", async () => {
    const keyId = `changes_unreached_${++seq}`;
    // 40 a day: every stock is short (less than MINUTE_STOCK_ROOM_SHARE × heldBound left after
    // it). A stock for the minute whose push is lost: test/quota.sparse-keys.test.ts.
    const v1 = policyOf(100, { perDay: 40 });
    const granted = T0 + 1_000;
    time.now = granted;
    await stockEverywhere(keyId, v1);

    // The IAD holder never answers the push (a lost connection): its keyChanged hangs.
    const namespace = env.QUOTA_HOLDER;
    const getByName = vi.mocked(namespace.getByName).getMockImplementation()!;
    vi.mocked(namespace.getByName).mockImplementation((name, options) => {
      const stub = getByName(name, options);
      if (!name.endsWith("@IAD")) return stub;
      return new Proxy(stub, {
        get: (target, prop) =>
          prop === "keyChanged" ? () => new Promise(() => {}) : Reflect.get(target, prop),
      });
    });
    const started = performance.now();
    await env.QUOTA.getByName(keyId).configure({ ...v1, version: 2, revoked: true });
    const tookMs = performance.now() - started;
    expect(tookMs, "configure waited for the holder that did not answer").toBeGreaterThanOrEqual(
      PUSH_DEADLINE_MS - 50,
    );
    // An upper bound with room for a loaded test machine: configure does not wait for it.
    expect(tookMs, "configure gave up on it").toBeLessThan(PUSH_DEADLINE_MS + 2_000);

    time.now += 10;
    for (const location of ["AMS", "FRA", "SIN"])
      expect(outcomeOf(await holderOf(keyId, location).admit(keyId, v1)), location).toBe("revoked");
    // IAD was not told: it admits from the stock the object counted (never more), until the
    // stock's lease ends, STOCK_LEASE_MS after it was granted…
    const iad = holderOf(keyId, "IAD");
    time.now = granted + STOCK_LEASE_MS - 1;
    const beforeExpiry = await iad.admit(keyId, v1);
    expect(fromStock(beforeExpiry) && outcomeOf(beforeExpiry)).toBe("allowed");
    // …then forwards, and the object refuses.
    time.now = granted + STOCK_LEASE_MS;
    const atExpiry = await iad.admit(keyId, v1);
    expect(fromStock(atExpiry)).toBe(false);
    expect(outcomeOf(atExpiry)).toBe("revoked");
  });

  it("a holder whose lease answer is still on its way when the change is pushed admits no request that arrives after the push", async () => {
    const keyId = `changes_in_flight_${++seq}`;
    const v1 = policyOf(100);
    time.now = T0 + 1_000;

    // The key's object answers the AMS holder's first call (asking for its stock), but the
    // answer is held on the way back until `release`.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const namespace = env.QUOTA;
    const getByName = vi.mocked(namespace.getByName).getMockImplementation()!;
    let decided = false;
    vi.mocked(namespace.getByName).mockImplementation((name, options) => {
      const stub = getByName(name, options);
      return new Proxy(stub, {
        get: (target, prop) =>
          prop === "admit"
            ? async (...args: Parameters<typeof stub.admit>) => {
                const answer = await stub.admit(...args);
                decided = true;
                await held;
                return answer;
              }
            : Reflect.get(target, prop),
      });
    });
    const ams = holderOf(keyId, "AMS");
    const first = ams.admit(keyId, v1);
    await vi.waitUntil(() => decided, { timeout: 5_000 });
    expect(await countOf(keyId), "the request and the stock were counted").toBe(1 + QUIET_STOCK);

    await env.QUOTA.getByName(keyId).configure({ ...v1, version: 2, revoked: true });
    // An isolate that still holds version 1 sends a request after the revocation was pushed.
    const second = ams.admit(keyId, v1);
    await new Promise((resolve) => setTimeout(resolve, 10));
    release();
    expect(outcomeOf(await first), "decided before the revocation").toBe("allowed");
    expect(outcomeOf(await second), "arrived after the revocation was pushed").toBe("revoked");
    await passTime();
    expect(await ams.unusedPermits()).toBe(0);
    expect(await countOf(keyId), "the stock came back").toBe(1);
  });
});
