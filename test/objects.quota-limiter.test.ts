import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { AUTH_FAILURES_PER_MINUTE, type Policy } from "../src/quota/windows";
import { alarmOf, BAN_MS, DAY0, mockClock, retryAtOf, T0 } from "./helpers";

const time = mockClock(T0);
let seq = 0;

const policy = (perMinute: number, perDay: number, version = 1, revoked = false): Policy => ({
  perMinute,
  perDay,
  version,
  revoked,
});
const limiter = () => env.QUOTA.getByName(`key_limiter_test_${++seq}`);
type Stub = ReturnType<typeof limiter>;

async function admitN(stub: Stub, p: Policy, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await stub.admit(p)).outcome);
  return out;
}

const usageRows = (stub: Stub) =>
  runInDurableObject(stub, (_instance, ctx) =>
    ctx.storage.sql.exec("SELECT * FROM usage").toArray(),
  );

describe("QuotaLimiter.admit", () => {
  it("counts admitted requests in both windows and refuses at the per-minute limit", async () => {
    const stub = limiter();
    const remaining: number[][] = [];
    for (let i = 0; i < 3; i++) {
      const d = await stub.admit(policy(3, 10));
      expect(d.outcome).toBe("allowed");
      remaining.push(d.windows.map((w) => w.remaining));
    }
    expect(remaining).toEqual([
      [2, 9],
      [1, 8],
      [0, 7],
    ]);
    const refused = await stub.admit(policy(3, 10));
    expect(refused.outcome).toBe("rate_limited");
    expect(retryAtOf(refused)).toBe(T0 + MINUTE_MS);
    expect(refused.windows.map((w) => w.remaining)).toEqual([0, 7]);
  });

  it("keeps its counts across eviction", async () => {
    const stub = limiter();
    expect(await admitN(stub, policy(5, 10), 3)).toEqual(["allowed", "allowed", "allowed"]);
    await evictDurableObject(stub);
    const d = await stub.admit(policy(5, 10));
    expect(d.windows.map((w) => w.remaining)).toEqual([1, 6]);
    await evictDurableObject(stub);
    expect(await admitN(stub, policy(5, 10), 2)).toEqual(["allowed", "rate_limited"]);
  });

  it("keeps a lease's unused permits, handed back, across eviction", async () => {
    const stub = limiter();
    const { lease } = await stub.admit(policy(100, 1_000), { want: 5, returning: [] });
    expect(lease?.permits).toBe(5);
    expect((await stub.usage()).minute.count).toBe(1 + 5);
    await stub.returnLease({ id: lease!.id, unused: 5, used: 0 });
    await evictDurableObject(stub);
    const usage = await stub.usage();
    expect([usage.minute.count, usage.day.count]).toEqual([1, 1]);
  });

  it("rolls to a new minute and a new UTC day", async () => {
    const stub = limiter();
    await admitN(stub, policy(2, 3), 3);
    time.now = T0 + MINUTE_MS;
    expect(await admitN(stub, policy(2, 3), 2)).toEqual(["allowed", "quota_exceeded"]);
    time.now = DAY0 + DAY_MS;
    const d = await stub.admit(policy(2, 3));
    expect(d.outcome).toBe("allowed");
    expect(d.windows.map((w) => w.remaining)).toEqual([1, 2]);
  });

  it("a clock stepping back over midnight stays in the new day: its windows and its bill", async () => {
    const stub = limiter();
    time.now = DAY0 + DAY_MS;
    expect(await admitN(stub, policy(2, 100), 1)).toEqual(["allowed"]);
    time.now = DAY0 + DAY_MS - 1; // an NTP correction
    expect(await admitN(stub, policy(2, 100), 2)).toEqual(["allowed", "rate_limited"]);
    const { days } = await stub.report();
    const newDay = new Date(DAY0 + DAY_MS).toISOString().slice(0, 10);
    expect(days.map((d) => [d.day, d.admitted, d.refused.rate_limited])).toEqual([[newDay, 2, 1]]);
  });
});

describe("QuotaLimiter policy versions", () => {
  it("ignores an older policy offered by a caller, adopts a newer one, and keeps it across eviction", async () => {
    const stub = limiter();
    await stub.configure(policy(5, 100, 2));
    // A Worker with a stale cached record offers version 1 with a 1/min limit: the stored version 2 wins.
    expect(await admitN(stub, policy(1, 100, 1), 3)).toEqual(["allowed", "allowed", "allowed"]);
    expect((await stub.admit(policy(1, 100, 1))).windows[0]!.limit).toBe(5);
    await evictDurableObject(stub);
    expect((await stub.admit(policy(1, 100, 1))).windows[0]!.limit).toBe(5);
    // A newer version offered by the caller is adopted.
    const d = await stub.admit(policy(8, 100, 3));
    expect(d.outcome).toBe("allowed");
    expect(d.windows[0]!.limit).toBe(8);
    expect((await stub.usage()).policy).toEqual(policy(8, 100, 3));
  });

  it("refuses every request once a revocation is configured, whatever the caller offers", async () => {
    const stub = limiter();
    await admitN(stub, policy(5, 100, 1), 1);
    await stub.configure(policy(5, 100, 2, true));
    expect((await stub.admit(policy(5, 100, 1))).outcome).toBe("revoked");
    await evictDurableObject(stub);
    expect((await stub.admit(policy(5, 100, 1))).outcome).toBe("revoked");
    expect((await stub.usage()).day.count).toBe(1);
  });
});

describe("QuotaLimiter.usage and unban", () => {
  it("reports nothing for a key that never made a request", async () => {
    const u = await limiter().usage();
    expect(u.policy).toBeNull();
    expect(u.minute).toMatchObject({ count: 0, limit: null });
    expect(u.day).toMatchObject({ count: 0, limit: null });
    expect(u.bannedUntil).toBeNull();
  });

  it("shows the newer of its own policy and the one offered (the key as D1 has it)", async () => {
    const stub = limiter();
    // Never told of a policy: the one offered.
    expect((await stub.usage(policy(4, 50, 2))).policy).toEqual(policy(4, 50, 2));
    await admitN(stub, policy(4, 50, 2), 1);
    // An older one offered (a stale record): its own.
    expect((await stub.usage(policy(1, 5, 1))).policy).toEqual(policy(4, 50, 2));
    // A newer one it has not been told of yet: the one offered, with its limits.
    const newer = await stub.usage(policy(8, 80, 3));
    expect(newer.policy).toEqual(policy(8, 80, 3));
    expect(newer.minute).toMatchObject({ count: 1, limit: 8 });
    expect(newer.day).toMatchObject({ count: 1, limit: 80 });
  });

  it("reports the current counts, limits and resets, with stale windows counted as 0", async () => {
    const stub = limiter();
    await admitN(stub, policy(4, 50), 3);
    time.now = T0 + 30_000;
    expect(await stub.usage()).toEqual({
      policy: policy(4, 50),
      minute: { count: 3, limit: 4, resetAt: T0 + MINUTE_MS },
      day: { count: 3, limit: 50, resetAt: DAY0 + DAY_MS },
      bannedUntil: null,
    });
    time.now = T0 + MINUTE_MS + 1;
    const next = await stub.usage();
    expect(next.minute.count).toBe(0);
    expect(next.day.count).toBe(3);
    time.now = DAY0 + DAY_MS;
    expect((await stub.usage()).day.count).toBe(0);
  });

  it("bans after more than max(10, perMinute) refusals in a minute, shows it, and unban lifts it", async () => {
    const stub = limiter();
    const outcomes = await admitN(stub, policy(2, 100), 13);
    expect(outcomes.slice(0, 2)).toEqual(["allowed", "allowed"]);
    expect(outcomes.slice(2, 12).every((o) => o === "rate_limited")).toBe(true);
    expect(outcomes[12]).toBe("key_banned");
    expect((await stub.usage()).bannedUntil).toBe(T0 + BAN_MS);

    time.now = T0 + 5 * MINUTE_MS;
    const banned = await stub.admit(policy(2, 100));
    expect(banned.outcome).toBe("key_banned");
    expect(retryAtOf(banned)).toBe(T0 + BAN_MS);

    await stub.unban();
    expect((await stub.usage()).bannedUntil).toBeNull();
    // The unban is stored: a fresh instance of the object does not bring the ban back.
    await evictDurableObject(stub);
    expect((await stub.usage()).bannedUntil).toBeNull();
    expect(await admitN(stub, policy(2, 100), 2)).toEqual(["allowed", "allowed"]);
    // Unbanning also forgets the refusals of this minute: the next refusal is not a ban.
    expect((await stub.admit(policy(2, 100))).outcome).toBe("rate_limited");
  });

  it("an unban of a key refused but not banned yet also forgets the minute's refusals", async () => {
    const stub = limiter();
    const outcomes = await admitN(stub, policy(2, 100), 12);
    expect(outcomes.slice(2)).toEqual(Array(10).fill("rate_limited")); // one short of a ban
    const { bannedUntilBefore } = await stub.unban();
    expect(bannedUntilBefore).toBeNull();
    expect((await stub.admit(policy(2, 100))).outcome).toBe("rate_limited");
    expect((await stub.usage()).bannedUntil).toBeNull();
  });

  it("ends the ban by itself after 15 minutes", async () => {
    const stub = limiter();
    await admitN(stub, policy(1, 100), 12);
    time.now = T0 + BAN_MS - 1;
    expect((await stub.admit(policy(1, 100))).outcome).toBe("key_banned");
    time.now = T0 + BAN_MS;
    expect((await stub.admit(policy(1, 100))).outcome).toBe("allowed");
    expect((await stub.usage()).bannedUntil).toBeNull();
  });
});

describe("QuotaLimiter cleanup alarm", () => {
  it("schedules cleanup after the day ends, re-schedules when run early, then deletes the usage row", async () => {
    const stub = limiter();
    await admitN(stub, policy(5, 100), 2);
    expect(await alarmOf(stub)).toBe(DAY0 + DAY_MS + MINUTE_MS);

    time.now = DAY0 + DAY_MS - 1;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub)).toHaveLength(1);
    expect(await alarmOf(stub)).toBe(DAY0 + DAY_MS + MINUTE_MS);

    time.now = DAY0 + DAY_MS + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub)).toHaveLength(0);
    expect(await alarmOf(stub)).toBeNull();

    // The key keeps working afterwards, from zero, and its policy survives the cleanup.
    const d = await stub.admit(policy(1, 1, 0));
    expect(d.outcome).toBe("allowed");
    expect(d.windows.map((w) => [w.limit, w.remaining])).toEqual([
      [5, 4],
      [100, 99],
    ]);
  });

  it("re-schedules while the key is banned past the end of the day, then cleans up", async () => {
    const stub = limiter();
    const lateStart = DAY0 + DAY_MS - 5 * MINUTE_MS; // 23:55 UTC
    time.now = lateStart;
    expect((await admitN(stub, policy(1, 100), 12)).at(-1)).toBe("key_banned");
    const bannedUntil = lateStart + BAN_MS; // 00:10 the next day

    time.now = DAY0 + DAY_MS + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub)).toHaveLength(1);
    // The next alarm is the ban's end: it writes the end to D1 and the audit trail, and the row,
    // idle from then on, goes with it.
    expect(await alarmOf(stub)).toBe(bannedUntil);
    expect((await stub.usage()).bannedUntil).toBe(bannedUntil);

    time.now = bannedUntil;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub)).toHaveLength(0);
  });
});

describe("QuotaLimiter idle", () => {
  it("a hand-back of a lease it settled already, reaching it after its cleanup, writes nothing", async () => {
    const stub = limiter();
    const { lease } = await stub.admit(policy(100, 1_000), { want: 5, returning: [] });
    expect(lease?.permits).toBe(5);
    // The day-end alarm settles the lease as stranded and clears the windows' row.
    time.now = DAY0 + DAY_MS + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub), "cleared by the day-end alarm").toHaveLength(0);
    // The lease's holder hands it back late (a retried hand-back); the object settled it already.
    time.now += 1_000;
    await stub.returnLease({ id: lease!.id, unused: 5, used: 0 });
    expect(await usageRows(stub), "no windows row written").toHaveLength(0);
    expect(await alarmOf(stub)).toBeNull();
    expect((await stub.usage()).day.count, "nothing credited to the new day").toBe(0);
  });
});

describe("QuotaLimiter idle, unbanned", () => {
  it("an unban of a key whose object is idle (its day over and cleaned up) leaves it holding nothing", async () => {
    const stub = limiter();
    await admitN(stub, policy(5, 100), 1);
    time.now = DAY0 + DAY_MS + MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await usageRows(stub), "cleared by the day-end alarm").toHaveLength(0);
    const { bannedUntilBefore } = await stub.unban();
    expect(bannedUntilBefore).toBeNull();
    expect(await usageRows(stub), "nothing written by the unban").toHaveLength(0);
    expect(await alarmOf(stub)).toBeNull();
  });
});

describe("AuthShield.countRequest (failed authentications)", () => {
  it("allows 30 failures per minute per client, then refuses until the minute ends", async () => {
    const shield = env.AUTH_SHIELD.getByName("198.51.100.7");
    for (let i = 1; i <= 30; i++) {
      const d = await shield.countRequest(AUTH_FAILURES_PER_MINUTE);
      expect(d.outcome).toBe("allowed");
      expect(d.windows[0]).toMatchObject({ limit: 30, remaining: 30 - i });
    }
    time.now = T0 + 59_000;
    const blocked = await shield.countRequest(AUTH_FAILURES_PER_MINUTE);
    expect(blocked.outcome).toBe("rate_limited");
    expect(retryAtOf(blocked)).toBe(T0 + MINUTE_MS);

    const other =
      await env.AUTH_SHIELD.getByName("198.51.100.8").countRequest(AUTH_FAILURES_PER_MINUTE);
    expect(other.outcome).toBe("allowed");

    await evictDurableObject(shield);
    expect((await shield.countRequest(AUTH_FAILURES_PER_MINUTE)).outcome).toBe("rate_limited");
    time.now = T0 + MINUTE_MS;
    const again = await shield.countRequest(AUTH_FAILURES_PER_MINUTE);
    expect(again.outcome).toBe("allowed");
    expect(again.windows[0]!.remaining).toBe(29);
  });

  it("clears its row with the alarm once the window is over", async () => {
    const shield = env.AUTH_SHIELD.getByName("198.51.100.9");
    await shield.countRequest(AUTH_FAILURES_PER_MINUTE);
    expect(await alarmOf(shield)).toBe(T0 + 2 * MINUTE_MS);
    time.now = T0 + 2 * MINUTE_MS;
    expect(await runDurableObjectAlarm(shield)).toBe(true);
    expect(
      await runInDurableObject(shield, (_i, ctx) =>
        ctx.storage.sql.exec("SELECT * FROM usage").toArray(),
      ),
    ).toHaveLength(0);
  });
});
