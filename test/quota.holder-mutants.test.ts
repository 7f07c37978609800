// Rules of the location holder (src/objects/quota-holder.ts, holder-key-record.ts) that no other
// test told apart from a small change to them (docs/mutation-testing.md, "By hand"): which copy
// of the key answers a request without a D1 read, and how often one admission id is decided.
import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { MINUTE_MS } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import {
  HELD_KEY_MAX_AGE_MS,
  HELD_KEY_READ_AHEAD_GAP_MAX_MS,
  HeldKeyRecord,
  REFUSING_COPY_TRUSTED_MS,
} from "../src/objects/holder-key-record";
import { holderName, QuotaHolder } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { STOCK_LEASE_MS } from "../src/quota/lease";
import { newAdmissionId } from "../src/quota/lease-messages";
import { backgroundWork, countObjectCalls } from "./background-work";
import {
  ADMIN,
  alarmOf,
  auth,
  BASE,
  callWith,
  dbWithReads,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  policyWith,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);
const { passTime, passTo, forgetSleeps, uncounted } = backgroundWork(time);
let seq = 0;

afterEach(() => vi.restoreAllMocks());

const holderOf = (keyId: string) => env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));

/** A request of `key` to `path` in AMS from an isolate whose record of the key is gone. */
const fromColdIsolate = (id: string, key: string, path = "/v1/pets?limit=1") => {
  forgetKey(id);
  return callWith(
    {},
    new Request(`${BASE}${path}`, {
      headers: auth(key, { "CF-Connecting-IP": `203.0.113.${++seq % 250}` }),
      cf: { colo: "AMS" },
    } as RequestInit),
  );
};
/** D1 no longer finds the key by its secret (a read now answers 401), or finds it again. */
const hideSecret = (id: string, hash: string) =>
  env.DB.prepare("UPDATE api_keys SET key_hash = ?2 WHERE id = ?1").bind(id, hash).run();
/** The pushes of key changes to location holders are lost on the way. */
const losePushes = () => {
  vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("lost"));
  vi.spyOn(console, "log").mockImplementation(() => undefined);
};
const minuteAfter = (t: number) => t - (t % MINUTE_MS) + MINUTE_MS;

describe("a location holder's copy of its key answering GET /v1/usage (QuotaHolder.authenticate)", () => {
  it("a copy that refuses the key, vouched for by its read, is read again once older than REFUSING_COPY_TRUSTED_MS: a key enabled meanwhile is let in", async () => {
    const { id, key } = await issueKey("free");
    const start = minuteAfter(T0) + 5_000;
    await passTo(start);
    expect((await patchKey(id, { enabled: false })).status).toBe(200);
    const refused = await expectError(
      await fromColdIsolate(id, key, "/v1/usage"),
      401,
      "unauthorized",
    );
    expect(refused.message).toMatch(/disabled/);
    // No stock there: enabling the key is pushed to no holder.
    expect(await holderOf(id).unusedPermits()).toBe(0);
    expect((await patchKey(id, { enabled: true })).status).toBe(200);
    expect(REFUSING_COPY_TRUSTED_MS).toBeLessThan(STOCK_LEASE_MS);
    await passTo(start + REFUSING_COPY_TRUSTED_MS);
    expect((await fromColdIsolate(id, key, "/v1/usage")).status).toBe(200);
  });

  it("a copy that decided a request is vouched for STOCK_LEASE_MS from that decision, not only from its read", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const start = minuteAfter(T0) + 5_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200); // read and decided
    await passTo(start + STOCK_LEASE_MS - 1_000);
    expect((await fromColdIsolate(id, key)).status).toBe(200); // decided on the copy
    await passTo(start + STOCK_LEASE_MS + 1_000);
    await hideSecret(id, `moved-${id}`);
    const usage = await fromColdIsolate(id, key, "/v1/usage");
    expect(usage.status, "the copy answers, vouched for by the second decision").toBe(200);
    await hideSecret(id, hash);
  });
});

describe("a location holder's copy of its key too old to be used as it is", () => {
  it("with no standing permits held there, is read again before the request is decided", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const start = minuteAfter(T0) + 5_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + 30 * MINUTE_MS); // its stock and any standing permits long over
    expect(await holderOf(id).unusedPermits()).toBe(0);
    await hideSecret(id, `moved-${id}`);
    await expectError(await fromColdIsolate(id, key), 401, "unauthorized");
    await hideSecret(id, hash);
  });

  it("with standing permits held there, and refusing the key (its expiry passed, moved later with the push lost), is read again, not used to refuse", async () => {
    const at = (ms: number) => new Date(ms).toISOString();
    const start = minuteAfter(T0) + 5_000;
    const gap = 2 * MINUTE_MS + 1_000; // too long for a read ahead
    const { id, key } = await issueKey("free", undefined, { expiresAt: at(start + gap + 30_000) });
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + gap);
    expect((await fromColdIsolate(id, key)).status).toBe(200); // on the old copy, read again
    await passTime();
    losePushes();
    expect((await patchKey(id, { expiresAt: at(start + 60 * MINUTE_MS) })).status).toBe(200);
    await passTo(start + 2 * gap); // the copy's expiry has passed; D1's has not
    const res = await fromColdIsolate(id, key);
    expect(res.status, "read again: the expiry moved later").toBe(200);
  });
});

describe("a location holder's copy read ahead of a key calling every minute", () => {
  it("is young when the key's request comes: the requests just after it are authenticated from it too", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const start = minuteAfter(T0) + 5_000;
    await passTo(start);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTo(start + MINUTE_MS);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    // The read ahead, due before the next request, finds the secret; then D1 no longer does.
    await passTo(start + 2 * MINUTE_MS - 5_000);
    await hideSecret(id, `moved-${id}`);
    await passTo(start + 2 * MINUTE_MS);
    expect((await fromColdIsolate(id, key)).status).toBe(200);
    await passTime();
    await passTo(start + 2 * MINUTE_MS + 1_000);
    expect((await fromColdIsolate(id, key)).status, "the copy read ahead is still young").toBe(200);
    await hideSecret(id, hash);
  });
});

describe("a location holder asked twice with one admission id", () => {
  it("gives the same answer, from one permit of its stock", async () => {
    const keyId = `holder_mutants_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId);
    await holder.admit(keyId, policy, null, newAdmissionId(time.now)); // the holder gets its stock
    const stock = await holder.unusedPermits();
    expect(stock).toBeGreaterThan(1);
    const id = newAdmissionId(time.now);
    const first = await holder.admit(keyId, policy, null, id);
    expect(first.reached && first.fromStock).toBe(true);
    time.now += 1_000;
    const again = await holder.admit(keyId, policy, null, id);
    expect(again).toEqual(first);
    expect(await holder.unusedPermits()).toBe(stock - 1);
  });
});

describe("HeldKeyRecord, the copy itself", () => {
  const roll = async (id: string, gracePeriodSeconds: number): Promise<string> => {
    const res = await postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds }, ADMIN);
    expect(res.status).toBe(201);
    return ((await res.json()) as { key: string }).key;
  };
  /** A copy of a new key, read from D1 at `at`, and its secret's hash. */
  async function readCopy(at: number) {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const copy = new HeldKeyRecord();
    expect((await copy.read(env.DB, id, hash, at))?.record.id).toBe(id);
    return { id, key, hash, copy };
  }

  it("is used until HELD_KEY_MAX_AGE_MS after its read, not at that instant", async () => {
    const { hash, copy } = await readCopy(T0);
    expect(copy.cached(hash, T0 + HELD_KEY_MAX_AGE_MS - 1)).not.toBeNull();
    expect(copy.cached(hash, T0 + HELD_KEY_MAX_AGE_MS)).toBeNull();
  });

  it("used once too old (onceStale), is not kept across an eviction until read again", async () => {
    const { id, hash, copy } = await readCopy(T0);
    expect(copy.kept()).not.toBeNull();
    expect(copy.onceStale(hash)).not.toBeNull();
    expect(copy.kept()).toBeNull();
    await copy.read(env.DB, id, hash, T0 + MINUTE_MS);
    expect(copy.kept()).not.toBeNull();
  });

  it("held again after an eviction, is read ahead by the secret it was kept with", async () => {
    const { id, copy } = await readCopy(T0);
    const kept = copy.kept();
    expect(kept).not.toBeNull();
    const again = new HeldKeyRecord();
    if (kept) again.restore(kept);
    expect(again.readAhead(env.DB, id, T0 + 10_000)).toBeNull(); // its first request: no gap known
    // 10 s later: the copy would be 30 s old at the next request, expected 10 s on.
    expect(again.readAhead(env.DB, id, T0 + 20_000)).not.toBeNull();
  });

  it("is read ahead for a key whose gap is HELD_KEY_READ_AHEAD_GAP_MAX_MS exactly", async () => {
    const { id, copy } = await readCopy(T0);
    expect(copy.readAhead(env.DB, id, T0)).toBeNull();
    const gapMax = T0 + HELD_KEY_READ_AHEAD_GAP_MAX_MS;
    expect(copy.readAhead(env.DB, id, gapMax)).not.toBeNull();
  });

  it("is read ahead once at a time: a request while a read ahead waits schedules none", async () => {
    const { id, copy } = await readCopy(T0);
    expect(copy.readAhead(env.DB, id, T0)).toBeNull();
    // 20 s on: the next request is expected at T0 + 40 s, the read ahead waits until T0 + 25 s.
    expect(copy.readAhead(env.DB, id, T0 + 20_000)).not.toBeNull();
    // 4 s on, the copy would be 28 s old at the next request: a read ahead is due, and waiting.
    expect(copy.readAhead(env.DB, id, T0 + 24_000)).toBeNull();
  });

  it("a newer version read by another secret drops the secrets met under the old one (a roll with no grace)", async () => {
    const { id, hash, copy } = await readCopy(T0);
    const rolled = await roll(id, 0);
    expect((await copy.read(env.DB, id, await sha256Hex(rolled), T0 + 1_000))?.secret).toBe(
      "current",
    );
    expect(copy.cached(hash, T0 + 1_000)).toBeNull();
  });

  it("its age counts from the latest read begun, whichever ends last", async () => {
    const { id, key } = await issueKey("free");
    const rolled = await roll(id, 3_600);
    const copy = new HeldKeyRecord();
    // Both secrets of the same version: the new one's read begun at T0 + 5 s ends first.
    expect((await copy.read(env.DB, id, await sha256Hex(rolled), T0 + 5_000))?.secret).toBe(
      "current",
    );
    expect((await copy.read(env.DB, id, await sha256Hex(key), T0))?.secret).toBe("previous");
    expect(copy.ageAt(T0 + 10_000)).toBe(5_000);
  });

  it("a vouch is not cut short by a read begun before it that ends after it", async () => {
    const { id, hash, copy } = await readCopy(T0);
    const version = copy.kept()?.record.version ?? -1;
    copy.vouch(version, T0 + 3_000);
    await copy.read(env.DB, id, hash, T0 + 1_000);
    expect(copy.vouchedFor(hash, T0 + 3_000 + STOCK_LEASE_MS - 1)).not.toBeNull();
  });

  it("a read that ends after the copy was forgotten leaves the read begun since to be shared", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    let reads = 0;
    const gates: (() => void)[] = [];
    const slowDb = dbWithReads(async (first) => {
      reads++;
      await new Promise<void>((open) => gates.push(open));
      return first();
    });
    const copy = new HeldKeyRecord();
    const before = copy.read(slowDb, id, hash, T0);
    copy.forget(); // a change pushed while the read is in flight
    const since = copy.read(slowDb, id, hash, T0 + 100);
    await vi.waitFor(() => expect(gates).toHaveLength(2));
    gates[0]?.();
    await before;
    const shared = copy.read(slowDb, id, hash, T0 + 200);
    gates[1]?.();
    await since;
    for (const open of gates.slice(2)) open();
    await shared;
    expect(reads).toBe(2);
  });
});

describe("a location holder's stock (LocationStock)", () => {
  it("surrendered to an isolate's call that fails, waits to go back with the next call: no permit is lost", async () => {
    const keyId = `holder_mutants_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId);
    await holder.admit(keyId, policy, null, newAdmissionId(time.now)); // the holder gets its stock
    const stock = await holder.unusedPermits();
    expect(stock).toBeGreaterThan(0);
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    vi.spyOn(env.QUOTA, "getByName").mockImplementation(() => {
      throw Object.assign(new Error("the key's object is unreachable"), { retryable: true });
    });
    await expect(
      holder.admitForIsolate(keyId, policy, { want: 5, returning: [] }),
    ).rejects.toThrow();
    vi.mocked(env.QUOTA.getByName).mockRestore();
    expect(await holder.unusedPermits(), "still counted here, to go back").toBe(stock);
  });

  it("refills at the minute's turn under the newest policy a request brought, not the last", async () => {
    const keyId = `holder_mutants_${++seq}`;
    const holder = holderOf(keyId);
    const turn = minuteAfter(minuteAfter(time.now));
    const start = turn - 2_000; // a key busy as the minute turns: a refill is due then
    await passTo(start);
    const newer = policyWith(60, 1_000, { version: 2 });
    const first = await holder.admit(keyId, newer, null, newAdmissionId(time.now));
    expect(first.reached && first.decision.outcome).toBe("allowed");
    await passTo(start + 1_000);
    // A request on an older copy of the key (another isolate's): answered stale.
    const older = await holder.admit(keyId, policyWith(60, 1_000), null, newAdmissionId(time.now));
    expect(older.reached && older.decision.outcome).toBe("stale");
    await passTo(turn + 1_000);
    await passTime();
    expect(await holder.unusedPermits(), "the refill at the turn brought a stock").toBeGreaterThan(
      0,
    );
  });

  it("asked by the key's object to share the bound restocks once: a request forwarded once the minute is too near its limit for a stock makes one call", {
    timeout: 30_000,
  }, async () => {
    const keyId = `holder_mutants_${++seq}`;
    const policy = policyWith(60, 1_000);
    const ams = holderOf(keyId);
    const sin = env.QUOTA_HOLDER.getByName(holderName(keyId, "SIN"));
    const start = minuteAfter(time.now) + 2_000;
    // AMS alone, three requests 1.5 s apart: its stock for the minute holds the whole bound.
    for (let i = 0; i < 3; i++) {
      await passTo(start + i * 1_500);
      await ams.admit(keyId, policy, null, newAdmissionId(time.now));
      await passTime();
    }
    // SIN's first request: forwarded, the key's object shares the bound, SIN restocks.
    await passTo(start + 4_000);
    const first = await sin.admit(keyId, policy, null, newAdmissionId(time.now));
    expect(first.reached && !first.fromStock, "SIN's first request forwarded").toBe(true);
    await passTime();
    // SIN's requests every 0.5 s until the minute's limit: from its stock, then forwarded.
    const objectCalls = countObjectCalls();
    const callsPerForwarded: number[] = [];
    for (let i = 1; i <= 60; i++) {
      await passTo(start + 4_000 + i * 500);
      const before = objectCalls();
      const answer = await sin.admit(keyId, policy, null, newAdmissionId(time.now));
      await passTime();
      if (answer.reached && !answer.fromStock) callsPerForwarded.push(objectCalls() - before);
    }
    expect(callsPerForwarded.length, "some requests forwarded").toBeGreaterThan(0);
    expect(callsPerForwarded, "calls to the key's object per request forwarded").toEqual(
      callsPerForwarded.map(() => 1),
    );
  });
});

describe("standing permits whose hand-back keeps failing, the holder evicted", () => {
  it("are retried by the alarm until the key's object has settled them as stranded, then forgotten", async () => {
    const keyId = `holder_mutants_${++seq}`;
    const policy = policyWith(60, 1_000);
    const holder = holderOf(keyId);
    const holderStub = uncounted(env.QUOTA_HOLDER, holderName(keyId, "AMS"));
    const evict = async () => {
      await holder.unusedPermits();
      await evictDurableObject(holderStub);
      forgetSleeps();
    };
    const start = minuteAfter(T0) + 45_000;
    await passTo(start);
    await holder.admit(keyId, policy, null, newAdmissionId(time.now));
    await passTo(start + 30_000); // the next minute's refill: standing permits
    await evict();
    await passTo(start + 5 * MINUTE_MS);
    const served = await holder.admit(keyId, policy, null, newAdmissionId(time.now));
    expect(served.reached && served.fromStock, "answered from a standing permit").toBe(true);
    await passTime();
    let failures = 0;
    for (const method of ["returnLease", "returnLeases"] as const)
      vi.spyOn(QuotaLimiter.prototype, method).mockImplementation(() => {
        failures++;
        throw new Error("the key's object is unreachable");
      });
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    let alarms = 0;
    for (let at = await alarmOf(holderStub); at !== null && alarms < 30; alarms++) {
      await evict();
      await passTo(Math.max(time.now, at));
      await runDurableObjectAlarm(holderStub);
      await passTime();
      at = await alarmOf(holderStub);
    }
    expect(failures, "the hand-back was made, and failed").toBeGreaterThan(1);
    expect(await alarmOf(holderStub), "no alarm left").toBeNull();
    expect(alarms).toBeLessThan(30);
    expect(await holder.unusedPermits()).toBe(0);
  });
});
