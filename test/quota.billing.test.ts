// Billing counts what was served: the usage history (and D1, the admin usage API, GET /v1/usage,
// the CSV) reports the requests admitted and served; permits leased and never reported used are
// reported apart as `stranded`, never as admitted. Driven against the key's real QuotaLimiter,
// real location holders and real lease holders, with fake time.
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { markKeyUsed } from "../src/db/keys";
import { saveUsageDays } from "../src/db/usage-history";
import { clock, DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { holderName } from "../src/objects/quota-holder";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { schemaVersion } from "../src/objects/schema-migrations";
import { heldBound, ISOLATE_LEASE_MS, STOCK_LEASE_MS } from "../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import { freezeBackgroundWork } from "./background-work";
import { ADMIN, alarmOf, call, fixClock, issueKey } from "./helpers";

const POLICY = { perMinute: 1_000, perDay: 100_000, version: 1, revoked: false };
const DAY = Date.UTC(2032, 4, 6);
const DAY_NAME = "2032-05-06";
const NINE = DAY + 9 * 3_600_000;
let seq = 0;

const newLimiter = (name: string) => env.QUOTA.getByName(`billing-${name}-${++seq}`);

/** The days the key's object holds, as GET /v1/usage and the admin API read them. */
const historyOf = (stub: DurableObjectStub<QuotaLimiter>) =>
  runInDurableObject(stub, (instance: QuotaLimiter) => instance.report(POLICY).days);

/** The key's day window count: everything the object counted, served or leased. */
const dayCountOf = async (stub: DurableObjectStub<QuotaLimiter>) =>
  (await stub.usage(POLICY)).day.count;

/**
 * When every lease granted up to `now` is settled if never handed back: STRANDED_AFTER_MS after
 * its expiry (at most STOCK_LEASE_MS away, or its minute's end for a location holder's stock for
 * the minute), and not before its minute ends.
 */
const settleDeadline = (now: number) =>
  Math.max(
    now + STOCK_LEASE_MS + STRANDED_AFTER_MS,
    now - (now % MINUTE_MS) + MINUTE_MS + STRANDED_AFTER_MS,
  );

async function storedDay(keyId: string, day: string) {
  return env.DB.prepare(
    "SELECT admitted, rate_limited, quota_exceeded, key_banned, stranded FROM key_usage_days WHERE key_id = ? AND day = ?",
  )
    .bind(keyId, day)
    .first();
}

describe("the usage history counts what was served", () => {
  it("a hand-back arriving after the next minute's grant still counts only what was used", async () => {
    const time = fixClock(NINE + 58_500); // 09:00:58.5: a lease then ends with its minute
    const stub = newLimiter("late");
    const first = await stub.admit(POLICY, { want: 20, returning: [] });
    expect(first.lease?.permits).toBe(20);
    expect(first.lease?.expiresAt).toBe(NINE + MINUTE_MS); // ends with its minute
    // 09:01:00.1: another isolate is granted a lease before the first hands its lease back
    // (GIVE_BACK_GRACE_MS after the expiry).
    time.now = NINE + MINUTE_MS + 100;
    const second = await stub.admit(POLICY, { want: 20, returning: [] });
    expect(second.lease?.permits).toBe(20);
    // The first isolate served 3 requests from its lease; the second served none.
    await stub.returnLease({ id: first.lease!.id, unused: 17, used: 3 });
    await stub.returnLease({ id: second.lease!.id, unused: 20, used: 0 });
    const [day] = await historyOf(stub);
    expect(day).toMatchObject({ admitted: 2 + 3, stranded: 0 });
    // The day window got the first lease's unused permits back too (its minute is over).
    expect(await dayCountOf(stub)).toBe(2 + 3);
  });

  /** An isolate's lease holder calling the key's object `stub` directly. */
  function isolateOf(stub: DurableObjectStub<QuotaLimiter>) {
    const calls: LeaseCalls = {
      admit: (request) => stub.admit(POLICY, request),
      giveBack: (returned) => stub.returnLease(returned),
      renew: (request) => stub.renewLease(POLICY, request),
    };
    return { leases: new LeaseHolder(), calls };
  }

  it("an isolate that dies right after reporting: admitted equals served, its lease's rest is stranded apart", async () => {
    const time = fixClock(NINE + 10_000);
    const stub = newLimiter("isolate");
    const { leases, calls } = isolateOf(stub);
    let served = 0;
    let reported = false;
    // A burst at 20 requests a second: the isolate takes a lease, and renews it ahead (reporting
    // what it used). It dies as that renewal's answer arrives.
    for (let i = 0; i < 200 && !reported; i++) {
      time.now += 50;
      const decided = await leases.admit(POLICY, calls);
      if (decided.decision.outcome === "allowed") served++;
      if (decided.renewal) reported = await decided.renewal;
    }
    expect(reported, "a renewal was granted").toBe(true);
    const lost = leases.unusedPermits;
    expect(lost, "the isolate held leased permits when it died").toBeGreaterThan(0);
    // Until the lease's deadline, its unreported permits are neither admitted nor stranded.
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: served, stranded: 0 });
    time.now = settleDeadline(time.now);
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: served, stranded: lost });
    // Everything the day window counted was either served or stranded.
    expect(await dayCountOf(stub)).toBe(served + lost);
  });

  it("an isolate that dies between reports: what it served since its last report is stranded, never admitted", async () => {
    const time = fixClock(NINE + 10_000);
    const stub = newLimiter("isolate-between");
    const { leases, calls } = isolateOf(stub);
    let served = 0;
    for (let i = 0; i < 60; i++) {
      time.now += 50;
      const decided = await leases.admit(POLICY, calls);
      if (decided.decision.outcome === "allowed") served++;
      await decided.renewal?.catch(() => undefined);
    }
    expect(served).toBe(60);
    const lost = leases.unusedPermits;
    expect(lost).toBeGreaterThan(0);
    time.now = settleDeadline(time.now);
    const [day] = await historyOf(stub);
    const counted = await dayCountOf(stub);
    expect(day!.admitted + day!.stranded).toBe(counted);
    expect(day!.stranded).toBeGreaterThanOrEqual(lost);
    expect(day!.admitted).toBeLessThanOrEqual(served);
    expect(served - day!.admitted).toBeLessThanOrEqual(heldBound(POLICY));
  });

  it("a location holder evicted mid-burst: admitted equals served, its lost stock is stranded apart", async () => {
    const time = fixClock(NINE + 10_000);
    freezeBackgroundWork();
    const { id: keyId } = await issueKey("enterprise", { perMinute: 1_000, perDay: 100_000 });
    // Requests reach the holder directly here: the key is marked used first, as the Worker does.
    await markKeyUsed(env.DB, keyId, clock.now());
    const policy = { ...POLICY };
    const limiter = env.QUOTA.getByName(keyId);
    await limiter.configure(policy);
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "FRA"));
    let served = 0;
    for (let i = 0; i < 40; i++) {
      time.now += 100;
      const answer = await holder.admit(keyId, policy);
      expect(answer.reached).toBe(true);
      if (answer.reached && answer.decision.outcome === "allowed") served++;
      // Let the renewal a request started in the background reach the object.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(served).toBe(40);
    const lost = await holder.unusedPermits();
    expect(lost, "the holder held stock when it was evicted").toBeGreaterThan(0);
    await evictDurableObject(holder);
    time.now = settleDeadline(time.now);
    const [day] = await historyOf(limiter);
    // Admitted: what the holder reported served (with its renewals); what it served since its
    // last report went with it, and is stranded with its stock, never billed.
    expect(day!.admitted + day!.stranded).toBe(await dayCountOf(limiter));
    expect(day!.admitted).toBeLessThanOrEqual(served);
    expect(served - day!.admitted).toBeLessThanOrEqual(heldBound(policy));
    expect(day!.stranded).toBeGreaterThanOrEqual(lost);
    // The admin usage API and its CSV say the same.
    const res = await call(`/admin/v1/keys/${keyId}/usage?from=${DAY_NAME}&to=${DAY_NAME}`, {
      headers: { ...ADMIN, Accept: "text/csv" },
    });
    expect((await res.text()).split("\r\n")[1]).toBe(
      `"${DAY_NAME}","${day!.admitted}","0","0","0","${day!.stranded}"`,
    );
  });

  it("a renewal reports what was used: counted at once, and only the rest is stranded if the lease is then lost", async () => {
    const time = fixClock(NINE + 10_000);
    const stub = newLimiter("renewal");
    const granted = (await stub.admit(POLICY, { want: 20, returning: [] })).lease!;
    time.now += 1_000;
    const renewal = await stub.renewLease(POLICY, {
      leaseId: granted.id,
      want: 5,
      holding: 14,
      used: 6,
      returning: [],
    });
    expect(renewal.granted).toMatchObject({ id: granted.id, permits: 5 }); // extended: 25 in all
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1 + 6, stranded: 0 });
    // A report that goes backwards (or past the lease) changes nothing it already counted.
    await stub.renewLease(POLICY, {
      leaseId: granted.id,
      want: 0,
      holding: 0,
      used: 2,
      returning: [],
    });
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1 + 6, stranded: 0 });
    // 30 s after the lease's expiry, but its minute is not over: it still counts as held.
    time.now += ISOLATE_LEASE_MS + STRANDED_AFTER_MS;
    expect(time.now).toBeLessThan(NINE + MINUTE_MS);
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1 + 6, stranded: 0 });
    time.now = NINE + MINUTE_MS;
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1 + 6, stranded: 25 - 6 });
  });

  it("a lease past its deadline is stranded by the next call, a hand-back too: its own late hand-back then counts nothing", async () => {
    const time = fixClock(NINE + 10_000);
    const stub = newLimiter("past-deadline");
    const lost = (await stub.admit(POLICY, { want: 20, returning: [] })).lease!;
    time.now = NINE + 30_000; // before the lost lease's deadline
    const other = (await stub.admit(POLICY, { want: 20, returning: [] })).lease!;
    // 09:01:10: past the lost lease's deadline. The first call since is the other lease's
    // hand-back (it served none); the lost lease's holder then reports 20 served, too late.
    time.now = NINE + MINUTE_MS + 10_000;
    expect(time.now).toBeGreaterThan(lost.expiresAt + STRANDED_AFTER_MS);
    await stub.returnLease({ id: other.id, unused: 20, used: 0 });
    await stub.returnLease({ id: lost.id, unused: 0, used: 20 });
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 2, stranded: 20 });
  });

  it("a renewal reporting on a lease the object already stranded is answered, and bills nothing more", async () => {
    const time = fixClock(NINE + 10_000);
    const stub = newLimiter("renew-stranded");
    const lost = (await stub.admit(POLICY, { want: 20, returning: [] })).lease!;
    time.now = NINE + MINUTE_MS + 10_000;
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1, stranded: 20 });
    const renewal = await stub.renewLease(POLICY, {
      leaseId: lost.id,
      want: 5,
      holding: 0,
      used: 20,
      returning: [],
    });
    expect(renewal.granted?.permits).toBe(5); // a new lease: the old one is gone
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1, stranded: 20 });
  });

  it("a renewal's answer that never arrived: the hand-back's used count, not its unused, decides", async () => {
    const time = fixClock(NINE + 10_000);
    const stub = newLimiter("lost-answer");
    const granted = (await stub.admit(POLICY, { want: 20, returning: [] })).lease!;
    // The object extends the lease by 10; the isolate never hears of it, serves 12 of the 20 it
    // knows of, and hands back 8 unused with 12 used.
    await stub.renewLease(POLICY, {
      leaseId: granted.id,
      want: 10,
      holding: 18,
      used: 2,
      returning: [],
    });
    time.now += ISOLATE_LEASE_MS;
    await stub.returnLease({ id: granted.id, unused: 8, used: 12 });
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1 + 12, stranded: 0 });
    expect(await dayCountOf(stub)).toBe(1 + 12);
  });
});

describe("the day-end flush", () => {
  it("waits for the day's leases to be settled, then writes what was served and what was stranded", async () => {
    const time = fixClock(DAY + DAY_MS - 10_000); // 23:59:50
    const { id: keyId } = await issueKey("enterprise", { perMinute: 1_000, perDay: 100_000 });
    const stub = env.QUOTA.getByName(keyId);
    // Lost: granted at 23:59:50, expires 23:59:51.75, never handed back.
    const lost = (await stub.admit(POLICY, { want: 10, returning: [] })).lease!;
    time.now = DAY + DAY_MS - 1_500; // 23:59:58.5: a lease then ends with its day
    const late = (await stub.admit(POLICY, { want: 10, returning: [] })).lease!;
    expect(late.expiresAt).toBe(DAY + DAY_MS);
    // An alarm early in the next day (00:00:05) cannot settle either lease yet: the day waits.
    time.now = DAY + DAY_MS + 5_000;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await storedDay(keyId, DAY_NAME)).toBeNull();
    const alarmAt = await alarmOf(stub);
    // It runs again as soon as the earliest of them can be settled: not sooner (no alarm
    // spinning until then), not later.
    expect(alarmAt).toBe(lost.expiresAt + STRANDED_AFTER_MS);
    // 00:00:06: the late lease comes back with 7 served.
    time.now += 1_000;
    await stub.returnLease({ id: late.id, unused: 3, used: 7 });
    // That hand-back starts the new day's windows (their cleanup is asked for after that day):
    // the finished day's write is not put off by it.
    const stillAt = await alarmOf(stub);
    expect(stillAt).toBe(lost.expiresAt + STRANDED_AFTER_MS);
    // The day-end alarm settles the lost lease as stranded and writes the day.
    time.now = DAY + DAY_MS + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await storedDay(keyId, DAY_NAME)).toEqual({
      admitted: 2 + 7,
      rate_limited: 0,
      quota_exceeded: 0,
      key_banned: 0,
      stranded: lost.permits,
    });
    expect(await historyOf(stub)).toEqual([]);
    const leases = await runInDurableObject(stub, (_: QuotaLimiter, state) =>
      state.storage.sql.exec("SELECT id FROM leases").toArray(),
    );
    expect(leases).toEqual([]);
    // Nothing of the day is left to wait for: the one alarm left is the cleanup of the windows'
    // row (the hand-back at 00:00:06 rolled it into the new day), after that day ends.
    const nextAlarm = await alarmOf(stub);
    expect(nextAlarm).toBe(DAY + 2 * DAY_MS + MINUTE_MS);
  });
});

describe("migrations", () => {
  it("a lease granted before (counted whole at grant) is settled right after the object's schema moves on", async () => {
    fixClock(NINE + 10_000);
    const stub = newLimiter("legacy");
    const granted = (await stub.admit(POLICY, { want: 20, returning: [] })).lease!;
    // Make the object what the previous release left: schema version 8, no `counted` column,
    // no stranded table, and the lease's 20 permits counted in the history at grant.
    await runInDurableObject(stub, (_: QuotaLimiter, state) => {
      const { sql } = state.storage;
      sql.exec("ALTER TABLE leases DROP COLUMN counted");
      sql.exec("DROP TABLE usage_history_stranded");
      sql.exec("UPDATE usage_history SET admitted = admitted + 20");
      sql.exec("UPDATE schema_version SET version = 8");
    });
    await evictDurableObject(stub);
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 21, stranded: 0 });
    expect(await runInDurableObject(stub, (_, state) => schemaVersion(state.storage.sql))).toBe(10);
    // D1 holds the day as it is (an admin read writes it), then the lease is handed back: 5
    // served, 15 unused. Their take-off is a newer snapshot of the day: a write of the one before
    // that arrives late (two writes racing) cannot undo it.
    const keyId = `billing-legacy-${seq}`;
    const [before] = await stub.saveUsageHistory();
    const { revision } = (await env.DB.prepare(
      "SELECT revision FROM key_usage_days WHERE key_id = ? AND day = ?",
    )
      .bind(keyId, DAY_NAME)
      .first<{ revision: number }>())!;
    expect(before).toMatchObject({ admitted: 21 });
    await stub.returnLease({ id: granted.id, unused: 15, used: 5 });
    expect((await historyOf(stub))[0]).toMatchObject({ admitted: 1 + 5, stranded: 0 });
    await stub.saveUsageHistory();
    await saveUsageDays(env.DB, keyId, [{ ...before!, revision }]);
    expect(await storedDay(keyId, DAY_NAME)).toMatchObject({ admitted: 1 + 5 });
  });

  it("a day D1 stored before stranded permits were counted reads 0 stranded", async () => {
    fixClock(NINE);
    const { id } = await issueKey("pro");
    await env.DB.prepare(
      "INSERT INTO key_usage_days (key_id, day, admitted, rate_limited, quota_exceeded, key_banned) VALUES (?1, '2032-05-01', 12, 1, 0, 0)",
    )
      .bind(id)
      .run();
    const res = await call(`/admin/v1/keys/${id}/usage?from=2032-05-01&to=2032-05-01`, {
      headers: ADMIN,
    });
    expect(await res.json()).toEqual({
      data: [
        {
          day: "2032-05-01",
          admitted: 12,
          refused: { rate_limited: 1, quota_exceeded: 0, key_banned: 0 },
          stranded: 0,
        },
      ],
    });
  });
});
