// Usage history: per key and UTC day, what the limiter admitted and refused by reason, read
// live for the current day and from D1 for finished ones, across a day boundary with fake time.
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getKey, markKeyUsed, policyOf } from "../src/db/keys";
import { clock, DAY_MS, MINUTE_MS } from "../src/lib/clock";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import {
  ADMIN,
  alarmOf,
  auth,
  brokenDb,
  call,
  expectError,
  fixClock,
  issueKey,
  keyDetail,
} from "./helpers";

type Day = {
  day: string;
  admitted: number;
  refused: { rate_limited: number; quota_exceeded: number; key_banned: number };
  stranded: number;
};

const DAY_A = "2031-03-14";
const DAY_B = "2031-03-15";
const START_A = Date.UTC(2031, 2, 14);
const START_B = START_A + DAY_MS;

const emptyDay = (day: string): Day => ({
  day,
  admitted: 0,
  refused: { rate_limited: 0, quota_exceeded: 0, key_banned: 0 },
  stranded: 0,
});

/** Sends `n` API requests and tallies what the API answered, per outcome, into `day`. */
async function send(key: string, n: number, day: Day): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await call("/v1/pets?limit=1", { headers: auth(key) });
    if (res.status === 200) {
      day.admitted += 1;
      continue;
    }
    const { code } = (await res.json()) as { code: keyof Day["refused"] };
    expect(res.status, code).toBe(429);
    day.refused[code] += 1;
  }
}

function usage(id: string, query: string, headers: Record<string, string> = {}) {
  return call(`/admin/v1/keys/${id}/usage${query}`, { headers: { ...ADMIN, ...headers } });
}

async function usageData(id: string, query: string): Promise<Day[]> {
  const res = await usage(id, query);
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { data: Day[] }).data;
}

async function storedRows(id: string) {
  const { results } = await env.DB.prepare(
    "SELECT day, admitted, rate_limited, quota_exceeded, key_banned, stranded FROM key_usage_days WHERE key_id = ? ORDER BY day",
  )
    .bind(id)
    .all();
  return results;
}

const daysHeldByObject = (id: string) =>
  runInDurableObject(env.QUOTA.getByName(id), (instance: QuotaLimiter) =>
    instance.saveUsageHistory().then((days) => days.map((d) => d.day)),
  );

describe("GET /admin/v1/keys/{id}/usage", () => {
  it("equals what the limiter admitted and refused by reason, across a day boundary, an eviction and the day-end alarm", async () => {
    const time = fixClock(START_A + DAY_MS - 2 * MINUTE_MS + 5_000); // 23:58:05 on day A
    const { id, key } = await issueKey("enterprise", { perMinute: 3, perDay: 5 });
    const a = emptyDay(DAY_A);
    const b = emptyDay(DAY_B);

    await send(key, 5, a); // 3 admitted, then the minute is full
    time.now += MINUTE_MS; // 23:59:05
    await evictDurableObject(env.QUOTA.getByName(id));
    await send(key, 16, a); // 2 more fill the day; refusals past the threshold ban the key
    expect(a.admitted).toBe(5);
    expect(a.refused.rate_limited).toBeGreaterThan(0);
    expect(a.refused.quota_exceeded).toBeGreaterThan(0);
    expect(a.refused.key_banned).toBeGreaterThan(0);

    time.now = START_B + 30_000; // 00:00:30 on day B: still banned
    await send(key, 2, b);
    time.now = START_B + 20 * MINUTE_MS; // the ban is over, a new day
    await send(key, 4, b);
    expect(b).toEqual({
      day: DAY_B,
      admitted: 3,
      refused: { rate_limited: 1, quota_exceeded: 0, key_banned: 2 },
      stranded: 0,
    });

    // Before the alarm: both days come from the object, none from D1 yet.
    expect(await storedRows(id)).toEqual([]);
    expect(await usageData(id, `?from=${DAY_A}&to=${DAY_B}`)).toEqual([a, b]);

    // The alarm after day A ended writes day A to D1; the object keeps only the current day.
    expect(await runDurableObjectAlarm(env.QUOTA.getByName(id))).toBe(true);
    expect(await storedRows(id)).toContainEqual({
      day: DAY_A,
      admitted: a.admitted,
      rate_limited: a.refused.rate_limited,
      quota_exceeded: a.refused.quota_exceeded,
      key_banned: a.refused.key_banned,
      stranded: 0,
    });
    expect(await daysHeldByObject(id)).toEqual([DAY_B]);

    // After an eviction, the same history: day A from D1, day B live from the object.
    await evictDurableObject(env.QUOTA.getByName(id));
    expect(await usageData(id, `?from=${DAY_A}&to=${DAY_B}`)).toEqual([a, b]);
    time.now += MINUTE_MS;
    await send(key, 1, b);
    expect(b.admitted).toBe(4);
    expect((await usageData(id, `?from=${DAY_B}&to=${DAY_B}`))[0]).toEqual(b);
  });

  it("lists every day of the range oldest first, zeros where nothing happened; defaults to the last 30 days", async () => {
    const time = fixClock(START_A + 12 * 3600_000);
    const { id, key } = await issueKey("pro");
    const today = emptyDay(DAY_A);
    await send(key, 2, today);
    // Up to today: a day after it is a 400 (test/admin-usage-future-day.test.ts).
    const days = await usageData(id, `?from=2031-03-10&to=${DAY_A}`);
    expect(days.map((d) => d.day)).toEqual([
      "2031-03-10",
      "2031-03-11",
      "2031-03-12",
      "2031-03-13",
      DAY_A,
    ]);
    expect(days[4]).toEqual(today);
    expect(days.filter((d) => d.day !== DAY_A)).toEqual(
      days.filter((d) => d.day !== DAY_A).map((d) => emptyDay(d.day)),
    );
    const defaults = await usageData(id, "");
    expect(defaults).toHaveLength(30);
    expect(defaults[0]!.day).toBe("2031-02-13");
    expect(defaults[29]).toEqual(today);
    time.now += DAY_MS;
    expect((await usageData(id, `?from=${DAY_A}`)).map((d) => d.day)).toEqual([DAY_A, DAY_B]);
  });

  it("answers CSV with Accept: text/csv", async () => {
    fixClock(START_A + 3600_000);
    const { id, key } = await issueKey("pro");
    await send(key, 3, emptyDay(DAY_A));
    const res = await usage(id, `?from=2031-03-13&to=${DAY_A}`, { Accept: "text/csv" });
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/csv/);
    expect(await res.text()).toBe(
      [
        '"day","admitted","rate_limited","quota_exceeded","key_banned","stranded"',
        '"2031-03-13","0","0","0","0","0"',
        '"2031-03-14","3","0","0","0","0"',
        "",
      ].join("\r\n"),
    );
  });

  it.each([
    ["text/csv", "csv"],
    ["text/csv, application/json", "csv"],
    ["application/json, text/csv", "csv"],
    ["text/csv;q=0.5, application/json;q=0.5", "csv"],
    ["text/csv;q=0, application/json", "json"],
    ["text/csv;q=0", "json"],
    ["application/json, text/csv;q=0.9", "json"],
    ["text/csv;q=0.4, */*;q=0.5", "json"],
    ["application/json;q=0.1, text/csv;q=0.2", "csv"],
    ["text/*", "json"],
    ["*/*", "json"],
  ])("Accept: %s → %s, as RFC 9110 ranks it (both usage listings)", async (accept, answered) => {
    fixClock(START_A + 3600_000);
    const { id } = await issueKey("pro");
    for (const path of [
      `/admin/v1/keys/${id}/usage?from=${DAY_A}&to=${DAY_A}`,
      `/admin/v1/usage?day=${DAY_A}&limit=1`,
    ]) {
      const res = await call(path, { headers: { ...ADMIN, Accept: accept } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get("Content-Type"), `${path} ${accept}`).toMatch(
        answered === "csv" ? /^text\/csv/ : /^application\/json/,
      );
      await res.arrayBuffer();
    }
  });

  it.each([
    ["a reversed range", "?from=2031-03-14&to=2031-03-13", "from"],
    ["more than 400 days", "?from=2030-01-01&to=2031-03-14", "400"],
    ["a malformed date", "?from=2031-3-14&to=2031-03-14", "from"],
    ["a date that does not exist", "?from=2031-02-30&to=2031-03-14", "from"],
    ["a date-time instead of a date", "?to=2031-03-14T00:00:00Z", "to"],
  ])("%s → 400", async (_label, query, named) => {
    fixClock(START_A);
    const { id } = await issueKey("pro");
    const body = await expectError(await usage(id, query), 400, "invalid_request");
    expect(body.message).toContain(named);
  });

  it("exactly 400 days is allowed; unknown key → 404; no token → 401", async () => {
    fixClock(START_A);
    const { id } = await issueKey("pro");
    expect(await usageData(id, "?from=2030-02-08&to=2031-03-14")).toHaveLength(400);
    await expectError(await usage("key_AAAAAAAAAAAAAAAAAAAA", ""), 404, "not_found");
    await expectError(await call(`/admin/v1/keys/${id}/usage`), 401, "unauthorized");
  });

  it("counts requests admitted from leases, whether a lease was used up or handed back", async () => {
    fixClock(Date.UTC(2033, 0, 2, 9));
    const { id, key } = await issueKey("free");
    const day = emptyDay("2033-01-02");
    // Sequential requests at a frozen clock: the isolate takes leases of ⌊60/10⌋ permits and
    // uses them up, so most of these never reach the object one by one.
    await send(key, 45, day);
    expect(day.admitted).toBe(45);
    expect((await usageData(id, "?from=2033-01-02&to=2033-01-02"))[0]).toEqual(day);
  });

  it("a day D1 does not take stays in the object, is still reported, and is written on a later alarm", async () => {
    const time = fixClock(START_A + 3600_000);
    const { id, key } = await issueKey("pro");
    const a = emptyDay(DAY_A);
    await send(key, 3, a);
    // A lease's unused permits go back within a second of its expiry (the give-back timer), long
    // before the day ends; time jumps here, so let the key's detail view (a usage read in this
    // isolate, which does not write the history to D1) hand them back first.
    expect((await keyDetail(id)).status).toBe(200);
    time.now = START_B + 2 * MINUTE_MS;
    const stub = env.QUOTA.getByName(id);
    // The object's D1 fails for the day-end alarm.
    await runInDurableObject(stub, (instance: QuotaLimiter) => {
      (instance as unknown as { env: Env }).env = { ...env, DB: brokenDb() };
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await storedRows(id)).toEqual([]);
    const alarmAt = await alarmOf(stub);
    // Tried again in 5 minutes: not sooner (no alarm spinning while D1 is down), not later.
    expect(alarmAt).toBe(time.now + 5 * MINUTE_MS);
    expect(await daysHeldByObject(id)).toContain(DAY_A);
    expect((await usageData(id, `?from=${DAY_A}&to=${DAY_A}`))[0]).toEqual(a);

    // D1 is back (a fresh instance has the real binding): the retry writes the day.
    await evictDurableObject(stub);
    expect(await runDurableObjectAlarm(env.QUOTA.getByName(id))).toBe(true);
    expect(await storedRows(id)).toEqual([
      { day: DAY_A, admitted: 3, rate_limited: 0, quota_exceeded: 0, key_banned: 0, stranded: 0 },
    ]);
  });
});

describe("stored days after a lease comes back", () => {
  /** Another isolate's request with a lease of 20 permits: 21 counted in the windows, 1 served. */
  async function leaseOf20(id: string) {
    // A request decided by the object directly: marked used first, as the Worker does.
    await markKeyUsed(env.DB, id, clock.now());
    const stub = env.QUOTA.getByName(id);
    const admission = await stub.admit(policyOf((await getKey(env.DB, id))!), {
      want: 20,
      returning: [],
    });
    expect(admission.lease?.permits).toBe(20);
    /** The lease handed back after `used` requests were admitted from it. */
    const handBack = (used: number) =>
      stub.returnLease({ id: admission.lease!.id, unused: 20 - used, used });
    return { stub, handBack };
  }

  /** The object's D1, with its first batch waiting until `release()`. */
  async function holdObjectWrites(stub: DurableObjectStub<QuotaLimiter>) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let batches = 0;
    const db = new Proxy(env.DB, {
      get: (target, prop) =>
        prop === "batch"
          ? async (statements: D1PreparedStatement[]) => {
              if (++batches === 1) await gate;
              return target.batch(statements);
            }
          : Reflect.get(target, prop).bind(target),
    });
    await runInDurableObject(stub, (instance: QuotaLimiter) => {
      (instance as unknown as { env: Env }).env = { ...env, DB: db };
    });
    const started = async () => {
      for (let i = 0; i < 500 && batches === 0; i++) await new Promise((r) => setTimeout(r, 2));
      expect(batches, "writes sent to D1").toBe(1);
    };
    return { release, started };
  }

  const row = (day: string, admitted: number) => ({
    day,
    admitted,
    rate_limited: 0,
    quota_exceeded: 0,
    key_banned: 0,
    stranded: 0,
  });

  it("the finished day stores what was served, not what a lease held when the history was read", async () => {
    const time = fixClock(START_A + 3600_000);
    const { id } = await issueKey("pro");
    const { stub, handBack } = await leaseOf20(id);
    // Read while the lease is out: the history (and D1) counts the one request served, not the
    // lease's 20 permits (the day window does: 21).
    expect((await usageData(id, `?from=${DAY_A}&to=${DAY_A}`))[0]!.admitted).toBe(1);
    expect(await storedRows(id)).toEqual([row(DAY_A, 1)]);
    expect((await stub.usage()).day.count).toBe(21);
    await handBack(4);
    expect((await stub.usage()).day.count).toBe(5);
    time.now = START_B + 2 * MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true); // the day-end flush
    expect(await storedRows(id)).toEqual([row(DAY_A, 5)]);
    expect(await daysHeldByObject(id)).toEqual([]);
    // The object keeps nothing of the day D1 took, its revision included.
    const revisions = await runInDurableObject(stub, (_: QuotaLimiter, state) =>
      state.storage.sql.exec("SELECT day_start FROM usage_history_revisions").toArray(),
    );
    expect(revisions).toEqual([]);
    expect((await usageData(id, `?from=${DAY_A}&to=${DAY_A}`))[0]!.admitted).toBe(5);
  });

  it("a lease never handed back: the first history read past its deadline reports and stores it stranded", async () => {
    const time = fixClock(START_A + 3600_000);
    const { id } = await issueKey("pro");
    await leaseOf20(id);
    // Two minutes on, the lease is past its deadline; nothing has called the object since.
    time.now += 2 * MINUTE_MS;
    const [day] = await usageData(id, `?from=${DAY_A}&to=${DAY_A}`);
    expect(day).toMatchObject({ admitted: 1, stranded: 20 });
    expect(await storedRows(id)).toEqual([{ ...row(DAY_A, 1), stranded: 20 }]);
  });

  it("two writes of a day racing while requests are admitted: the later, higher totals stay", async () => {
    fixClock(START_A + 3600_000);
    const { id } = await issueKey("pro");
    const stub = env.QUOTA.getByName(id);
    const policy = policyOf((await getKey(env.DB, id))!);
    expect((await stub.admit(policy)).outcome).toBe("allowed");
    const { release, started } = await holdObjectWrites(stub);
    const older = runInDurableObject(stub, (instance: QuotaLimiter) => instance.saveUsageHistory());
    await started();
    for (let i = 0; i < 2; i++) expect((await stub.admit(policy)).outcome).toBe("allowed");
    await runInDurableObject(stub, (instance: QuotaLimiter) => instance.saveUsageHistory());
    release();
    expect((await older).map((d) => d.admitted)).toEqual([1]);
    expect(await storedRows(id)).toEqual([row(DAY_A, 3)]);
  });

  it("a day the object held before it numbered revisions replaces what D1 stored then", async () => {
    const time = fixClock(START_A + 3600_000);
    const { id } = await issueKey("pro");
    const stub = env.QUOTA.getByName(id);
    const policy = policyOf((await getKey(env.DB, id))!);
    for (let i = 0; i < 3; i++) expect((await stub.admit(policy)).outcome).toBe("allowed");
    // As the older code left them: D1 has the totals of an earlier read, with no revision…
    await env.DB.prepare(
      "INSERT INTO key_usage_days (key_id, day, admitted, rate_limited, quota_exceeded, key_banned) VALUES (?1, ?2, 1, 0, 0, 0)",
    )
      .bind(id, DAY_A)
      .run();
    // …and the object has the day's totals with no revision either.
    await runInDurableObject(stub, (_: QuotaLimiter, state) => {
      state.storage.sql.exec("DELETE FROM usage_history_revisions");
    });
    time.now = START_B + 2 * MINUTE_MS;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await storedRows(id)).toEqual([row(DAY_A, 3)]);
  });

  it("two writes of a day racing: the later totals stay, whichever reaches D1 last", async () => {
    fixClock(START_A + 3600_000);
    const { id } = await issueKey("pro");
    const { stub, handBack } = await leaseOf20(id);
    const { release, started } = await holdObjectWrites(stub);
    // A history read takes its snapshot (1) and its write waits on the way to D1…
    const older = runInDurableObject(stub, (instance: QuotaLimiter) => instance.saveUsageHistory());
    await started();
    // …the lease comes back with 5 served, and a second read writes the newer totals (6) first.
    await handBack(5);
    const newer = await runInDurableObject(stub, (instance: QuotaLimiter) =>
      instance.saveUsageHistory(),
    );
    expect(newer.map((d) => d.admitted)).toEqual([6]);
    expect(await storedRows(id)).toEqual([row(DAY_A, 6)]);
    release();
    expect((await older).map((d) => d.admitted)).toEqual([1]);
    expect(await storedRows(id)).toEqual([row(DAY_A, 6)]);
  });
});

describe("GET /admin/v1/usage?day=", () => {
  it("lists every key that existed on the day with its totals, paged, and as CSV", async () => {
    const time = fixClock(Date.UTC(2032, 0, 5, 8));
    const made = [await issueKey("pro"), await issueKey("free"), await issueKey("business")];
    const tallies = made.map(() => emptyDay("2032-01-05"));
    for (const [i, k] of made.entries()) await send(k.key, i + 1, tallies[i]!);
    // Reading a key's usage writes its days to D1 (on demand); the others wait for the day's end.
    for (const k of made) await usage(k.id, "?from=2032-01-05&to=2032-01-05");
    time.now += DAY_MS;
    const later = await issueKey("pro"); // created after the day: not listed

    const seen: Array<Day & { keyId: string; plan: string }> = [];
    let cursor: string | null = null;
    do {
      const res = await call(
        `/admin/v1/usage?day=2032-01-05&limit=2${cursor ? `&cursor=${cursor}` : ""}`,
        { headers: ADMIN },
      );
      expect(res.status).toBe(200);
      const page = (await res.json()) as { data: typeof seen; nextCursor: string | null };
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    const ids = seen.map((r) => r.keyId);
    expect(ids).toEqual([...ids].sort());
    expect(ids).not.toContain(later.id);
    for (const [i, k] of made.entries()) {
      const row = seen.find((r) => r.keyId === k.id);
      expect(row).toMatchObject({ plan: k.plan, ...tallies[i] });
    }

    const csv = await call("/admin/v1/usage?day=2032-01-05&limit=100", {
      headers: { ...ADMIN, Accept: "text/csv" },
    });
    expect(csv.headers.get("Content-Type")).toMatch(/^text\/csv/);
    const lines = (await csv.text()).trim().split("\r\n");
    expect(lines[0]).toBe(
      '"key_id","name","plan","owner_id","day","admitted","rate_limited","quota_exceeded","key_banned","stranded"',
    );
    expect(lines).toContain(
      `"${made[2]!.id}","test-business","business","","2032-01-05","3","0","0","0","0"`,
    );
  });

  it("today's totals are live from each key's object, with the time they were read; a finished day's are final", async () => {
    const time = fixClock(Date.UTC(2032, 1, 7, 14, 5));
    const made = [await issueKey("pro"), await issueKey("free"), await issueKey("pro")];
    const tallies = made.map(() => emptyDay("2032-02-07"));
    // The first two serve requests; nobody reads their usage, so D1 has nothing of today yet.
    await send(made[0]!.key, 25, tallies[0]!);
    await send(made[1]!.key, 41, tallies[1]!);
    expect(await storedRows(made[0]!.id)).toEqual([]);

    async function dayPage(day: string) {
      const res = await call(`/admin/v1/usage?day=${day}&limit=100`, { headers: ADMIN });
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as {
        data: Array<Day & { keyId: string }>;
        asOf: string | null;
      };
    }
    const today = await dayPage("2032-02-07");
    expect(today.asOf).toBe(new Date(time.now).toISOString());
    for (const [i, k] of made.entries())
      expect(today.data.find((r) => r.keyId === k.id)).toMatchObject(tallies[i]!);

    // As CSV, the same live totals, and the time they were read in a header.
    const csv = await call("/admin/v1/usage?day=2032-02-07&limit=100", {
      headers: { ...ADMIN, Accept: "text/csv" },
    });
    expect(csv.headers.get("Usage-As-Of")).toBe(today.asOf);
    expect((await csv.text()).split("\r\n")).toContain(
      `"${made[1]!.id}","test-free","free","","2032-02-07","41","0","0","0","0"`,
    );

    // Once the day is over (and its totals are in D1), they are final: no time of reading.
    time.now += DAY_MS;
    for (const k of made) await runDurableObjectAlarm(env.QUOTA.getByName(k.id));
    const finished = await dayPage("2032-02-07");
    expect(finished.asOf).toBeNull();
    for (const [i, k] of made.entries())
      expect(finished.data.find((r) => r.keyId === k.id)).toMatchObject(tallies[i]!);
    const finishedCsv = await call("/admin/v1/usage?day=2032-02-07&limit=100", {
      headers: { ...ADMIN, Accept: "text/csv" },
    });
    expect(finishedCsv.headers.get("Usage-As-Of")).toBeNull();
  });

  it.each([
    ["no day", ""],
    ["a malformed day", "?day=05-01-2032"],
    ["a bad cursor", "?day=2032-01-05&cursor=nope"],
    ["a bad limit", "?day=2032-01-05&limit=0"],
  ])("%s → 400", async (_label, query) => {
    await expectError(
      await call(`/admin/v1/usage${query}`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
  });
});

/** Parses RFC 4180 CSV strictly: a quote inside a quoted field must be doubled. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let i = 0;
  const field = (): string => {
    if (text[i] !== '"') {
      const end = text.slice(i).search(/,|\r\n/);
      const value = end < 0 ? text.slice(i) : text.slice(i, i + end);
      if (value.includes('"')) throw new Error(`a bare quote in an unquoted field: ${value}`);
      i += value.length;
      return value;
    }
    let value = "";
    i++;
    for (;;) {
      const q = text.indexOf('"', i);
      if (q < 0) throw new Error("an unterminated quoted field");
      value += text.slice(i, q);
      i = q + 1;
      if (text[i] === '"') {
        value += '"';
        i++;
        continue;
      }
      if (i < text.length && text[i] !== "," && !text.startsWith("\r\n", i))
        throw new Error(`a lone quote inside a quoted field, before ${text.slice(i, i + 10)}`);
      return value;
    }
  };
  while (i < text.length) {
    row.push(field());
    if (text[i] === ",") {
      i++;
      continue;
    }
    if (!text.startsWith("\r\n", i)) throw new Error(`no CRLF after a record at ${i}`);
    i += 2;
    rows.push(row);
    row = [];
  }
  return rows;
}

describe("usage CSV cells", () => {
  it("round-trip commas and quotes, and neutralise formula triggers (=, +, -, @)", async () => {
    fixClock(Date.UTC(2034, 6, 1, 9));
    const names = [
      'Acme "West", Inc.',
      "-2+3",
      '=HYPERLINK("http://x")',
      "+SUM(1,2)",
      "@cmd",
      "plain",
    ];
    const made = [];
    for (const name of names) {
      const { id } = await issueKey("pro", undefined, { name, ownerId: name });
      made.push({ id, name });
    }
    const rows: string[][] = [];
    let cursor: string | null = null;
    do {
      const res = await call(
        `/admin/v1/usage?day=2034-07-01&limit=100${cursor ? `&cursor=${cursor}` : ""}`,
        { headers: { ...ADMIN, Accept: "text/csv" } },
      );
      expect(res.status).toBe(200);
      const [header, ...body] = parseCsv(await res.text());
      expect(header).toEqual([
        "key_id",
        "name",
        "plan",
        "owner_id",
        "day",
        "admitted",
        "rate_limited",
        "quota_exceeded",
        "key_banned",
        "stranded",
      ]);
      rows.push(...body);
      cursor = res.headers.get("Next-Cursor");
    } while (cursor);
    for (const { id, name } of made) {
      const row = rows.find((r) => r[0] === id);
      expect(row, id).toHaveLength(10);
      const shown = /^[=+\-@]/.test(name) ? `'${name}` : name;
      expect([row![1], row![3]], name).toEqual([shown, shown]);
    }
  });
});
