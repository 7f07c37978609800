// What the key's QuotaLimiter does on each admit and renewal besides its answer: a lease only
// when it carries permits, the ban's edges, leases settled when due, and the alarm that keeps
// storage bounded. Driven against a real object, with fake time.
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import type { Policy } from "../src/quota/windows";
import { alarmOf, BAN_MS, MIDNIGHT, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);
let seq = 0;

const newObject = () => env.QUOTA.getByName(`limiter_calls_${++seq}`);
type Stub = DurableObjectStub<QuotaLimiter>;

const usageRows = (stub: Stub) =>
  runInDurableObject(stub, (_i, ctx) => ctx.storage.sql.exec("SELECT * FROM usage").toArray());
/** The days the object holds, as GET /v1/usage reads them. */
const daysOf = (stub: Stub) =>
  runInDurableObject(stub, (instance: QuotaLimiter) => instance.report().days);

/** Sends requests until the key is banned; returns when the ban ends. */
async function banKey(stub: Stub, policy: Policy): Promise<number> {
  let outcome = "";
  for (let i = 0; i < 100 && outcome !== "key_banned"; i++)
    outcome = (await stub.admit(policy)).outcome;
  expect(outcome).toBe("key_banned");
  const bannedUntil = (await stub.usage()).bannedUntil;
  expect(bannedUntil).toBe(time.now + BAN_MS);
  return bannedUntil!;
}

afterEach(() => vi.restoreAllMocks());

describe("a lease comes only with permits", () => {
  it("a request near the limit, refused, or of a revoked key that asks for a lease gets none", async () => {
    const stub = newObject();
    const policy = policyWith(5, 1_000);
    // Room for 4 leased permits takes a lease of 1 (a quarter of the room).
    expect((await stub.admit(policy, { want: 20, returning: [] })).lease?.permits).toBe(1);
    // 2 left after this request: a quarter of it is no permit at all.
    const near = await stub.admit(policy, { want: 20, returning: [] });
    expect(near.outcome).toBe("allowed");
    expect(near.lease).toBeNull();
    expect(near.windows[0]!.remaining).toBe(2);
    await stub.admit(policy);
    await stub.admit(policy);
    const refused = await stub.admit(policy, { want: 20, returning: [] });
    expect(refused.outcome).toBe("rate_limited");
    expect(refused.lease).toBeNull();
    expect((await stub.usage()).minute.count).toBe(5);

    const revoked = policyWith(5, 1_000, { version: 2, revoked: true });
    time.now += MINUTE_MS;
    const answer = await stub.admit(revoked, { want: 20, returning: [] });
    expect(answer.outcome).toBe("revoked");
    expect(answer.lease).toBeNull();
    expect((await stub.usage()).minute.count).toBe(0);
  });
});

describe("the ban's edges", () => {
  it("a renewal at the instant the ban ends is granted, as a request then is admitted", async () => {
    const stub = newObject();
    const policy = policyWith(20, 1_000);
    const first = await stub.admit(policy, { want: 2, returning: [] });
    expect(first.lease?.permits).toBe(2);
    const bannedUntil = await banKey(stub, policy);

    time.now = bannedUntil - 1;
    const during = await stub.renewLease(policy, {
      leaseId: first.lease!.id,
      want: 2,
      holding: 0,
      returning: [],
    });
    expect(during.granted).toBeNull();

    time.now = bannedUntil;
    const renewal = await stub.renewLease(policy, {
      leaseId: first.lease!.id,
      want: 2,
      holding: 0,
      returning: [],
    });
    expect(renewal.granted?.permits).toBe(2);
    expect((await stub.admit(policy)).outcome).toBe("allowed");
    expect((await stub.usage()).minute.count).toBe(3);
  });

  it("a banned key's further requests do not wake the alarm again: the ban is noted once", async () => {
    const stub = newObject();
    const policy = policyWith(1, 100);
    const bannedUntil = await banKey(stub, policy);
    // The ban wakes the alarm at once, to write it to D1; then the alarm waits for its end.
    expect(await alarmOf(stub)).toBe(time.now);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await alarmOf(stub)).toBe(bannedUntil);

    for (let i = 0; i < 5; i++) {
      time.now += 1_000;
      expect((await stub.admit(policy)).outcome).toBe("key_banned");
    }
    expect(await alarmOf(stub)).toBe(bannedUntil);
  });
});

describe("leases settled when due", () => {
  // A lease granted at T0 (10:20:00.000) to an isolate that then went silent: it expires at
  // 10:20:01.750 and is due 30 s later, but not before its minute ends (10:21:00.000).
  const DUE = T0 + MINUTE_MS;

  it("the key's next request settles a lease past its deadline as stranded: a hand-back after that changes nothing", async () => {
    const stub = newObject();
    const policy = policyWith(1_000, 100_000);
    const silent = await stub.admit(policy, { want: 20, returning: [] });
    expect(silent.lease?.permits).toBe(20);

    time.now = DUE;
    expect((await stub.admit(policy)).outcome).toBe("allowed");
    // The silent holder comes back late: it had used 5 of the 20.
    await stub.returnLease({ id: silent.lease!.id, unused: 15, used: 5 });
    expect(await daysOf(stub)).toEqual([
      { day: "2030-06-10", admitted: 2, refused: expect.anything(), stranded: 20 },
    ]);
  });

  it("so does a renewal from another holder", async () => {
    const stub = newObject();
    const policy = policyWith(1_000, 100_000);
    const silent = await stub.admit(policy, { want: 20, returning: [] });
    expect(silent.lease?.permits).toBe(20);
    time.now = DUE - 3_000;
    const busy = await stub.admit(policy, { want: 20, returning: [] });
    expect(busy.lease?.permits).toBe(20);

    // The busy holder's renewal, sent late in the minute after 3 of its permits were used,
    // arrives in the next one.
    time.now = DUE;
    const renewal = await stub.renewLease(policy, {
      leaseId: busy.lease!.id,
      want: 20,
      holding: 17,
      returning: [],
      used: 3,
    });
    expect(renewal.granted?.permits).toBe(20);
    await stub.returnLease({ id: silent.lease!.id, unused: 15, used: 5 });
    const [today] = await daysOf(stub);
    expect(today).toMatchObject({ admitted: 2 + 3, stranded: 20 });
  });
});

describe("the cleanup alarm", () => {
  it("a renewal that is the key's first call since its usage was cleaned up schedules the next cleanup", async () => {
    const stub = newObject();
    const policy = policyWith(1_000, 100_000);
    time.now = MIDNIGHT - 1_750;
    const lease = (await stub.admit(policy, { want: 20, returning: [] })).lease;
    expect(lease?.expiresAt).toBe(MIDNIGHT);
    // The day-end alarm settles the lease (as stranded), writes the day and clears the usage row.
    time.now = MIDNIGHT + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub)).toHaveLength(0);
    expect(await alarmOf(stub)).toBeNull();

    // A renewal of that lease arrives late: it gets a new lease in the new day.
    time.now = MIDNIGHT + MINUTE_MS + 5_000;
    const renewal = await stub.renewLease(policy, {
      leaseId: lease!.id,
      want: 20,
      holding: 0,
      returning: [],
    });
    expect(renewal.granted?.permits).toBe(20);
    expect(await usageRows(stub)).toHaveLength(1);
    expect(await alarmOf(stub)).toBe(MIDNIGHT + DAY_MS + MINUTE_MS);

    time.now = MIDNIGHT + DAY_MS + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub)).toHaveLength(0);
  });

  /** Logged error lines, parsed; console.error is silenced for the test. */
  function loggedErrors() {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "error").mockImplementation(
      (line: unknown) => void lines.push(JSON.parse(String(line)) as Record<string, unknown>),
    );
    return lines;
  }
  const cleanupFailure = {
    level: "error",
    msg: "could not schedule usage cleanup",
    error: "Error: storage is unavailable",
  };
  const cleanupAt = (now: number) => Math.floor(now / DAY_MS) * DAY_MS + DAY_MS + MINUTE_MS;

  /** The key's first request, admitted while storage fails to read or set the alarm. */
  async function admitWhileAlarmsFail(stub: Stub, logged: Record<string, unknown>[]) {
    return runInDurableObject(stub, async (instance: QuotaLimiter, ctx) => {
      const failing = vi
        .spyOn(ctx.storage, "getAlarm")
        .mockRejectedValue(new Error("storage is unavailable"));
      const decision = instance.admit(policyWith(5, 100));
      await vi.waitFor(() =>
        expect(logged).toContainEqual(expect.objectContaining(cleanupFailure)),
      );
      failing.mockRestore();
      return decision.outcome;
    });
  }

  it("a request is admitted even when its cleanup cannot be scheduled, the failure is logged with its cause, and the next request schedules it", async () => {
    const stub = newObject();
    const logged = loggedErrors();
    expect(await admitWhileAlarmsFail(stub, logged)).toBe("allowed");
    expect(await alarmOf(stub)).toBeNull();
    // The same day's next request would not schedule the cleanup again, but this one is owed.
    time.now += 1_000;
    expect((await stub.admit(policyWith(5, 100))).outcome).toBe("allowed");
    await vi.waitFor(async () => expect(await alarmOf(stub)).toBe(cleanupAt(time.now)));
  });

  it("an object evicted before its failed alarm was set again gets one when it starts, and its alarm re-arms the cleanup", async () => {
    const stub = newObject();
    const logged = loggedErrors();
    expect(await admitWhileAlarmsFail(stub, logged)).toBe("allowed");
    expect(await alarmOf(stub)).toBeNull();
    await evictDurableObject(stub);
    time.now += 1_000;
    expect(await alarmOf(stub), "set as the object starts, for at once").toBe(time.now);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await alarmOf(stub)).toBe(cleanupAt(time.now));
    expect(await usageRows(stub), "the day's windows are kept").toHaveLength(1);
  });

  it("an object that starts again with an alarm set keeps it: no extra alarm run", async () => {
    const stub = newObject();
    expect((await stub.admit(policyWith(5, 100))).outcome).toBe("allowed");
    await vi.waitFor(async () => expect(await alarmOf(stub)).toBe(cleanupAt(time.now)));
    await evictDurableObject(stub);
    time.now += 1_000;
    expect(await alarmOf(stub)).toBe(cleanupAt(time.now));
  });

  it("of two alarms that could not be set, the earlier is owed", async () => {
    const stub = newObject();
    const logged = loggedErrors();
    // While storage fails: the day's cleanup (midnight and a minute) cannot be set, then the
    // ban's record (due now) cannot either.
    await runInDurableObject(stub, async (instance: QuotaLimiter, ctx) => {
      const failing = vi
        .spyOn(ctx.storage, "getAlarm")
        .mockRejectedValue(new Error("storage is unavailable"));
      let outcome = "";
      for (let i = 0; i < 100 && outcome !== "key_banned"; i++)
        outcome = instance.admit(policyWith(5, 100)).outcome;
      expect(outcome).toBe("key_banned");
      await vi.waitFor(() =>
        expect(logged).toContainEqual(
          expect.objectContaining({ msg: "could not schedule the ban's record" }),
        ),
      );
      failing.mockRestore();
    });
    expect(logged).toContainEqual(expect.objectContaining(cleanupFailure));
    expect(await alarmOf(stub)).toBeNull();
    time.now += 1_000;
    await stub.admit(policyWith(5, 100));
    await vi.waitFor(async () => expect(await alarmOf(stub)).not.toBeNull());
    expect(await alarmOf(stub), "the ban's record, not the later cleanup").toBe(T0);
  });

  it("an object that holds nothing starts with no alarm", async () => {
    const stub = newObject();
    expect((await stub.usage()).day.count).toBe(0);
    await evictDurableObject(stub);
    expect(await alarmOf(stub)).toBeNull();
  });

  it("a call that asks for two alarms keeps the earlier", async () => {
    const stub = newObject();
    const logged = loggedErrors();
    expect(await admitWhileAlarmsFail(stub, logged)).toBe("allowed");
    // The next day's first request asks for its cleanup and for the one owed: the earlier stays.
    const owed = cleanupAt(time.now);
    time.now += DAY_MS;
    expect((await stub.admit(policyWith(5, 100))).outcome).toBe("allowed");
    await vi.waitFor(async () => expect(await alarmOf(stub)).not.toBeNull());
    expect(await alarmOf(stub)).toBe(owed);
  });
});

describe("storage it does not need is not touched", () => {
  // Each alarm read and write and each row write is a billed storage operation on every request.
  const upsertsOfUsage = (exec: { mock: { calls: unknown[][] } }) =>
    exec.mock.calls.filter(([sql]) => /^\s*INSERT INTO usage\b/.test(String(sql))).length;

  it("a day's first request reads the alarm for its cleanup and its history and sets it once; the day's next request reads none", async () => {
    const stub = newObject();
    await runInDurableObject(stub, async (instance: QuotaLimiter, ctx) => {
      const get = vi.spyOn(ctx.storage, "getAlarm");
      const set = vi.spyOn(ctx.storage, "setAlarm");
      expect(instance.admit(policyWith(5, 100)).outcome).toBe("allowed");
      await vi.waitFor(() => expect(get).toHaveBeenCalledTimes(2));
      // The second read's continuation (which would set the alarm) runs before this one.
      await get.mock.results[1]!.value;
      await Promise.resolve();
      expect(set.mock.calls).toEqual([[MIDNIGHT + MINUTE_MS]]);

      get.mockClear();
      time.now += 1_000;
      expect(instance.admit(policyWith(5, 100)).outcome).toBe("allowed");
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(get).not.toHaveBeenCalled();
    });
  });

  it("a request that changes no count writes no usage row", async () => {
    const stub = newObject();
    await stub.admit(policyWith(5, 100));
    await runInDurableObject(stub, (instance: QuotaLimiter, ctx) => {
      const exec = vi.spyOn(ctx.storage.sql, "exec");
      // A revoked key's request is refused without a count (no rate-limit refusal either).
      const revoked = policyWith(5, 100, { version: 2, revoked: true });
      expect(instance.admit(revoked).outcome).toBe("revoked");
      expect(upsertsOfUsage(exec)).toBe(0);
      // The control: a counted request writes the row.
      const counted = instance.admit(policyWith(5, 100, { version: 3 }));
      expect(counted.outcome).toBe("allowed");
      expect(upsertsOfUsage(exec)).toBe(1);
    });
  });
});
