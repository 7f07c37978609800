// Who is using what: the key list's activity (last used, today against the day quota, ban), the
// banned state filter and the search by secret; automatic bans and their ends in the audit trail
// (actor system), and the audit filters.
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import {
  ADMIN,
  alarmOf,
  auth,
  BAN_MS,
  brokenDb,
  call,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  T0,
} from "./helpers";

const time = mockClock(T0);

const list = (key: string) => call("/v1/pets", { headers: auth(key) });
const iso = (ms: number) => new Date(ms).toISOString();

interface Listed {
  id: string;
  name: string;
  activity: {
    lastUsedDay: string | null;
    today: { used: number; limit: number };
    bannedUntil: string | null;
  } | null;
}

async function listKeys(query: string): Promise<Listed[]> {
  const res = await call(`/admin/v1/keys?limit=100&${query}`, { headers: ADMIN });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return (JSON.parse(text) as { data: Listed[] }).data;
}

interface Entry {
  at: string;
  actor: string;
  action: string;
  keyId: string;
  changes: Record<string, { before: unknown; after: unknown }>;
}

async function audit(query: string): Promise<Entry[]> {
  const res = await call(`/admin/v1/audit?limit=100&${query}`, { headers: ADMIN });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return (JSON.parse(text) as { data: Entry[] }).data;
}

/** Runs the object's alarm handler now, whether or not an alarm is set. */
const runObjectAlarm = (stub: DurableObjectStub<QuotaLimiter>) =>
  runInDurableObject(stub, (instance: QuotaLimiter) => instance.alarm());

/** Counts the batches of writes the key's object sends to D1 from now on (this instance). */
async function countObjectWrites(stub: DurableObjectStub<QuotaLimiter>): Promise<() => number> {
  let batches = 0;
  const db = new Proxy(env.DB, {
    get: (target, prop) =>
      prop === "batch"
        ? (statements: D1PreparedStatement[]) => {
            batches++;
            return target.batch(statements);
          }
        : Reflect.get(target, prop).bind(target),
  });
  await runInDurableObject(stub, (instance: QuotaLimiter) => {
    (instance as unknown as { env: Env }).env = { ...env, DB: db };
  });
  return () => batches;
}

/** perMinute 3: 3 admitted, 10 refusals tolerated, the 11th refusal (at `at`) bans the key. */
async function banKey(name: string, at: number) {
  const issued = await issueKey("enterprise", { perMinute: 3, perDay: 1000 }, { name });
  for (let i = 0; i < 3; i++) expect((await list(issued.key)).status).toBe(200);
  for (let i = 0; i < 10; i++) await expectError(await list(issued.key), 429, "rate_limited");
  time.now = at;
  await expectError(await list(issued.key), 429, "key_banned");
  return { ...issued, bannedUntil: at + BAN_MS };
}

describe("the key list's activity", () => {
  it("shows the last day used, today's requests against the day quota, and nothing for an unused key", async () => {
    const busy = await issueKey("pro", undefined, { name: "activity-busy" });
    const old = await issueKey("pro", undefined, { name: "activity-old" });
    const idle = await issueKey("pro", undefined, { name: "activity-idle" });
    for (let i = 0; i < 4; i++) expect((await list(busy.key)).status).toBe(200);
    await env.DB.prepare(
      "INSERT INTO key_usage_days (key_id, day, admitted, rate_limited, quota_exceeded, key_banned) VALUES (?1, '2030-06-01', 5, 0, 0, 0), (?1, '2030-06-03', 0, 2, 0, 0), (?1, '2030-06-05', 0, 0, 0, 0)",
    )
      .bind(old.id)
      .run();
    const byName = new Map((await listKeys("q=activity-")).map((k) => [k.name, k.activity]));
    expect(byName.get("activity-busy")).toEqual({
      lastUsedDay: "2030-06-10",
      today: { used: 4, limit: 10_000 },
      bannedUntil: null,
    });
    // A day with only refusals counts as used; a row of zeros does not.
    expect(byName.get("activity-old")).toEqual({
      lastUsedDay: "2030-06-03",
      today: { used: 0, limit: 10_000 },
      bannedUntil: null,
    });
    expect(byName.get("activity-idle")).toEqual({
      lastUsedDay: null,
      today: { used: 0, limit: 10_000 },
      bannedUntil: null,
    });
    expect(idle.id).toBeTruthy();
  });

  it("finds a key by the start of its secret, as a consumer reads it out, and by its name", async () => {
    const target = await issueKey("pro", undefined, { name: "findme-by-secret" });
    const other = await issueKey("pro", undefined, { name: "someone-else" });
    for (const q of [target.key.slice(0, 13), target.key.slice(0, 11)]) {
      const ids = (await listKeys(`q=${q}`)).map((k) => k.id);
      expect(ids, q).toContain(target.id);
      expect(ids, q).not.toContain(other.id);
    }
    expect((await listKeys("q=findme-")).map((k) => k.id)).toEqual([target.id]);
    // The stored prefix is pet_test_ and 4 characters: one of them wrong finds nothing.
    const wrong = target.key[12] === "x" ? "y" : "x";
    expect(await listKeys(`q=${target.key.slice(0, 12)}${wrong}`)).toEqual([]);
    // A name search never matches on the shared pet_ start of every secret.
    expect(await listKeys("q=pet")).toEqual([]);
  });
});

describe("automatic bans", () => {
  it("are recorded by system when they start and end; the banned filter lists the key meanwhile", async () => {
    const banned = await banKey("ban-recorded", T0 + 5_000);
    const quiet = await issueKey("pro", undefined, { name: "ban-quiet" });
    const stub = env.QUOTA.getByName(banned.id);
    // The request that earned the ban did not wait for D1: the alarm writes it, at once.
    expect((await listKeys("state=banned")).map((k) => k.id)).not.toContain(banned.id);
    expect(await alarmOf(stub)).toBe(T0 + 5_000);
    expect(await runDurableObjectAlarm(stub)).toBe(true);

    const listed = await listKeys("state=banned");
    expect(listed.map((k) => k.id)).toContain(banned.id);
    expect(listed.map((k) => k.id)).not.toContain(quiet.id);
    expect(listed.find((k) => k.id === banned.id)?.activity?.bannedUntil).toBe(
      iso(banned.bannedUntil),
    );
    const [start] = await audit(`keyId=${banned.id}&action=ban`);
    expect(start).toMatchObject({
      at: iso(T0 + 5_000),
      actor: "system",
      action: "ban",
      changes: { bannedUntil: { before: null, after: iso(banned.bannedUntil) } },
    });

    // Running the alarm again before the end writes nothing twice.
    time.now = T0 + 6 * MINUTE_MS;
    await runDurableObjectAlarm(stub);
    expect(await audit(`keyId=${banned.id}&action=ban`)).toHaveLength(1);

    // The alarm set for the ban's end, run on time, writes the end.
    expect(await alarmOf(stub)).toBe(banned.bannedUntil);
    time.now = banned.bannedUntil;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await listKeys("state=banned")).map((k) => k.id)).not.toContain(banned.id);
    const end = await audit(`keyId=${banned.id}&actor=system`);
    expect(end.map((e) => e.action)).toEqual(["ban_end", "ban"]);
    expect(end[0]?.changes).toEqual({
      bannedUntil: { before: iso(banned.bannedUntil), after: null },
    });
  });

  it("an alarm run again writes nothing to D1 twice: not the ban's start, nor its end", async () => {
    const banned = await banKey("ban-once", T0 + 5_000);
    const stub = env.QUOTA.getByName(banned.id);
    expect(await runDurableObjectAlarm(stub)).toBe(true); // writes the start
    const batches = await countObjectWrites(stub);
    time.now = T0 + 6 * MINUTE_MS;
    await runObjectAlarm(stub);
    expect(batches(), "writes before the ban's end").toBe(0);
    time.now = banned.bannedUntil;
    await runObjectAlarm(stub); // writes the end
    expect(batches(), "writes at the ban's end").toBe(1);
    time.now = banned.bannedUntil + MINUTE_MS;
    await runObjectAlarm(stub);
    expect(batches(), "writes after the ban's end").toBe(1);
    expect((await audit(`keyId=${banned.id}&actor=system`)).map((e) => e.action)).toEqual([
      "ban_end",
      "ban",
    ]);
  });

  it("a ban D1 does not take is written by the alarm 5 minutes later, once", async () => {
    const banned = await banKey("ban-retried", T0 + 5_000);
    const stub = env.QUOTA.getByName(banned.id);
    await runInDurableObject(stub, (instance: QuotaLimiter) => {
      (instance as unknown as { env: Env }).env = { ...env, DB: brokenDb() };
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await listKeys("state=banned")).map((k) => k.id)).not.toContain(banned.id);
    expect(await audit(`keyId=${banned.id}&action=ban`)).toEqual([]);
    // Tried again in 5 minutes: not sooner (no alarm spinning while D1 is down), not later.
    expect(await alarmOf(stub)).toBe(T0 + 5_000 + 5 * MINUTE_MS);

    // D1 is back (a fresh instance has the real binding).
    await evictDurableObject(stub);
    time.now = T0 + 5_000 + 5 * MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await listKeys("state=banned")).map((k) => k.id)).toContain(banned.id);
    expect(await audit(`keyId=${banned.id}&action=ban`)).toHaveLength(1);
    expect(await alarmOf(stub)).toBe(banned.bannedUntil);
  });

  it("an operator's unban clears the banned state and no ban_end follows", async () => {
    const banned = await banKey("ban-lifted", T0 + 5_000);
    const stub = env.QUOTA.getByName(banned.id);
    await runDurableObjectAlarm(stub);
    expect((await listKeys("state=banned")).map((k) => k.id)).toContain(banned.id);
    const unban = await call(`/admin/v1/keys/${banned.id}/unban`, {
      method: "POST",
      headers: ADMIN,
    });
    expect(unban.status).toBe(200);
    expect((await listKeys("state=banned")).map((k) => k.id)).not.toContain(banned.id);
    time.now = banned.bannedUntil + 1;
    await runDurableObjectAlarm(stub);
    expect((await audit(`keyId=${banned.id}`)).map((e) => e.action)).toEqual([
      "unban",
      "ban",
      "create",
    ]);
  });

  it("a disabled key is not listed as banned", async () => {
    const banned = await banKey("ban-disabled", T0 + 5_000);
    await runDurableObjectAlarm(env.QUOTA.getByName(banned.id));
    expect((await patchKey(banned.id, { enabled: false })).status).toBe(200);
    expect((await listKeys("state=banned")).map((k) => k.id)).not.toContain(banned.id);
    expect((await listKeys("state=disabled")).map((k) => k.id)).toContain(banned.id);
  });
});

describe("audit filters", () => {
  it("narrow by actor, action and UTC day range (inclusive); a reversed range or unknown action is 400", async () => {
    const ALICE = { Authorization: "Bearer test-alice-admin-token" };
    const key = await issueKey("pro", undefined, { name: "audit-filters" });
    time.now = T0 + 2 * 86_400_000; // 2030-06-12
    expect(
      (
        await call(`/admin/v1/keys/${key.id}`, {
          method: "PATCH",
          headers: { ...ALICE, "Content-Type": "application/json" },
          body: JSON.stringify({ name: "audit-filters-2" }),
        })
      ).status,
    ).toBe(200);
    const mine = `keyId=${key.id}`;
    expect((await audit(`${mine}&actor=alice`)).map((e) => e.action)).toEqual(["update"]);
    expect((await audit(`${mine}&actor=admin`)).map((e) => e.action)).toEqual(["create"]);
    expect((await audit(`${mine}&action=create`)).map((e) => e.actor)).toEqual(["admin"]);
    expect((await audit(`${mine}&from=2030-06-11`)).map((e) => e.action)).toEqual(["update"]);
    expect((await audit(`${mine}&to=2030-06-10`)).map((e) => e.action)).toEqual(["create"]);
    expect((await audit(`${mine}&from=2030-06-10&to=2030-06-12`)).map((e) => e.action)).toEqual([
      "update",
      "create",
    ]);
    expect(await audit(`${mine}&from=2030-06-11&to=2030-06-11`)).toEqual([]);
    await expectError(
      await call(`/admin/v1/audit?from=2030-06-12&to=2030-06-10`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
    await expectError(
      await call(`/admin/v1/audit?action=delete`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
    await expectError(
      await call(`/admin/v1/keys?state=sleeping`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
  });
});
