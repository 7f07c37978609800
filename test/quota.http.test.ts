import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getKey, policyOf } from "../src/db/keys";
import { MINUTE_MS } from "../src/lib/clock";
import {
  auth,
  call,
  callWith,
  expectError,
  issueKey,
  keyDetail,
  MIDNIGHT,
  mockClock,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);

const list = (key: string) => call("/v1/pets", { headers: auth(key) });
const secs = (ms: number) => String(Math.ceil(ms / 1000));

function rl(res: Response) {
  const h = res.headers;
  return {
    limit: h.get("X-RateLimit-Limit"),
    remaining: h.get("X-RateLimit-Remaining"),
    reset: h.get("X-RateLimit-Reset"),
    policy: h.get("RateLimit-Policy"),
    rateLimit: h.get("RateLimit"),
    retryAfter: h.get("Retry-After"),
  };
}

async function usage(id: string) {
  const res = await keyDetail(id);
  expect(res.status).toBe(200);
  return (
    (await res.json()) as {
      usage: {
        minute: { count: number; limit: number };
        day: { count: number; limit: number };
        bannedUntil: string | null;
      };
    }
  ).usage;
}

describe("rate limit headers on every status", () => {
  it("carries X-RateLimit-*, RateLimit and RateLimit-Policy on 200, 201, 400, 404, 405 and 413", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 10, perDay: 100 });
    time.now = T0 + 10_000;
    const cases: Array<[string, () => Promise<Response>, number]> = [
      ["list", () => list(key), 200],
      ["create", () => postJson("/v1/pets", { name: "Rex", categoryId: 1 }, auth(key)), 201],
      ["bad query", () => call("/v1/pets?limit=0", { headers: auth(key) }), 400],
      ["unknown path", () => call("/v1/nothing-here", { headers: auth(key) }), 404],
      ["unknown pet", () => call("/v1/pets/987654321", { headers: auth(key) }), 404],
      ["wrong method", () => call("/v1/pets", { method: "DELETE", headers: auth(key) }), 405],
      [
        "too large",
        () => postJson("/v1/pets", { name: "x".repeat(20_000), categoryId: 1 }, auth(key)),
        413,
      ],
    ];
    let used = 0;
    for (const [what, send, status] of cases) {
      const res = await send();
      used++;
      expect(res.status, what).toBe(status);
      expect(rl(res), what).toEqual({
        limit: "10",
        remaining: String(10 - used),
        reset: secs(T0 + MINUTE_MS),
        policy: '"minute";q=10;w=60, "day";q=100;w=86400',
        rateLimit: `"minute";r=${10 - used};t=50, "day";r=${100 - used};t=${secs(MIDNIGHT - time.now)}`,
        retryAfter: null,
      });
      await res.arrayBuffer();
    }
  });

  it("names the day as binding when it has fewer left than the minute", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 10, perDay: 12 });
    for (let i = 0; i < 9; i++) expect((await list(key)).status).toBe(200);
    time.now = T0 + MINUTE_MS;
    const res = await list(key);
    // minute: 9 left; day: 2 left
    expect(rl(res)).toMatchObject({ limit: "12", remaining: "2", reset: secs(MIDNIGHT) });
  });
});

describe("429 over the limits", () => {
  it("refuses with rate_limited and Retry-After until the minute ends, then admits again at hh:mm:00", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 3, perDay: 5 });
    for (let i = 0; i < 3; i++) expect((await list(key)).status).toBe(200);
    time.now = T0 + 20_500;
    const res = await list(key);
    await expectError(res, 429, "rate_limited");
    expect(rl(res)).toMatchObject({
      limit: "3",
      remaining: "0",
      reset: secs(T0 + MINUTE_MS),
      retryAfter: "40",
    });
    expect(rl(res).policy).toBe('"minute";q=3;w=60, "day";q=5;w=86400');
    expect(rl(res).rateLimit).toBe(`"minute";r=0;t=40, "day";r=2;t=${secs(MIDNIGHT - time.now)}`);

    time.now = T0 + MINUTE_MS - 1;
    const last = await list(key);
    await expectError(last, 429, "rate_limited");
    expect(last.headers.get("Retry-After")).toBe("1");

    time.now = T0 + MINUTE_MS;
    const next = await list(key);
    expect(next.status).toBe(200);
    // minute 2 left, day 1 left: the day binds
    expect(rl(next)).toMatchObject({ limit: "5", remaining: "1", reset: secs(MIDNIGHT) });
  });

  it("refuses with quota_exceeded once the day is used, showing the day's limit, 0 and the next UTC midnight", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 3, perDay: 5 });
    for (let i = 0; i < 3; i++) expect((await list(key)).status).toBe(200);
    time.now = T0 + MINUTE_MS;
    for (let i = 0; i < 2; i++) expect((await list(key)).status).toBe(200);
    time.now = T0 + 2 * MINUTE_MS + 300;
    const res = await list(key);
    await expectError(res, 429, "quota_exceeded");
    expect(rl(res)).toMatchObject({
      limit: "5",
      remaining: "0",
      reset: secs(MIDNIGHT),
      retryAfter: secs(MIDNIGHT - time.now),
    });
  });

  it("does not count rejected requests against either window", async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 3, perDay: 5 });
    for (let i = 0; i < 3; i++) expect((await list(key)).status).toBe(200);
    for (let i = 0; i < 5; i++) await expectError(await list(key), 429, "rate_limited");
    expect((await usage(id)).day.count).toBe(3);

    time.now = T0 + MINUTE_MS;
    const a = await list(key);
    expect(a.status).toBe(200);
    expect(rl(a)).toMatchObject({ limit: "5", remaining: "1" });
    expect((await list(key)).status).toBe(200);
    await expectError(await list(key), 429, "quota_exceeded");
    const u = await usage(id);
    expect(u.day.count).toBe(5);
    expect(u.minute.count).toBe(2);
  });

  it("restores the day's quota at 00:00 UTC exactly", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 3, perDay: 5 });
    time.now = MIDNIGHT - 2 * MINUTE_MS;
    for (let i = 0; i < 3; i++) expect((await list(key)).status).toBe(200);
    time.now = MIDNIGHT - MINUTE_MS;
    for (let i = 0; i < 2; i++) expect((await list(key)).status).toBe(200);
    time.now = MIDNIGHT - 1;
    const last = await list(key);
    await expectError(last, 429, "quota_exceeded");
    expect(rl(last)).toMatchObject({
      limit: "5",
      remaining: "0",
      reset: secs(MIDNIGHT),
      retryAfter: "1",
    });

    time.now = MIDNIGHT;
    const res = await list(key);
    expect(res.status).toBe(200);
    expect(rl(res)).toMatchObject({
      limit: "3",
      remaining: "2",
      reset: secs(MIDNIGHT + MINUTE_MS),
    });
    expect(rl(res).rateLimit).toBe(`"minute";r=2;t=60, "day";r=4;t=86400`);
  });
});

describe("exact admission under concurrency (slow: hundreds of simultaneous real requests)", () => {
  const statuses = (responses: Response[]) => responses.map((r) => r.status);
  const count = <T>(xs: T[], x: T) => xs.filter((y) => y === x).length;

  // Hundreds of requests through workerd: seconds on a shared machine, hence the longer timeouts.
  it("admits exactly 50 of 200 simultaneous requests on a key allowing 50 a minute", {
    timeout: 30_000,
  }, async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 50, perDay: 10_000 });
    time.now = T0 + 5_000;
    const responses = await Promise.all(Array.from({ length: 200 }, () => list(key)));
    const s = statuses(responses);
    expect(count(s, 200)).toBe(50);
    expect(count(s, 429)).toBe(150);
    const codes = await Promise.all(
      responses
        .filter((r) => r.status === 429)
        .map(async (r) => ((await r.json()) as { code: string }).code),
    );
    // 50 refusals are tolerated in a minute (perMinute 50); the 51st and later ones ban the key.
    expect(count(codes, "rate_limited")).toBe(50);
    expect(count(codes, "key_banned")).toBe(100);
    const remaining = responses
      .filter((r) => r.status === 200)
      .map((r) => Number(r.headers.get("X-RateLimit-Remaining")));
    expect(remaining.sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    await Promise.all(responses.filter((r) => r.status === 200).map((r) => r.arrayBuffer()));
    expect((await usage(id)).day.count).toBe(50);
  });

  it("admits exactly the remaining room R of N > R simultaneous requests", {
    timeout: 30_000,
  }, async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 200, perDay: 130 });
    for (let i = 0; i < 20; i++) expect((await list(key)).status).toBe(200);
    time.now = T0 + MINUTE_MS;
    const responses = await Promise.all(Array.from({ length: 150 }, () => list(key)));
    const s = statuses(responses);
    expect(count(s, 200)).toBe(110);
    expect(count(s, 429)).toBe(40);
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    expect((await usage(id)).day.count).toBe(130);
  });
});

describe("reads decided alongside the limiter call", () => {
  it("a read refused while it ran carries only the refusal: no ETag, Link or bookmark of the discarded page", async () => {
    const k = await issueKey("enterprise", { perMinute: 3, perDay: 100 });
    for (const name of ["s1", "s2"])
      await postJson("/v1/pets", { name, categoryId: 1 }, auth(k.key)); // 2 of 3
    const results = await Promise.all(
      Array.from({ length: 5 }, () => call("/v1/pets?limit=1", { headers: auth(k.key) })),
    );
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(4);
    expect(ok[0]!.headers.get("Link")).toContain('rel="next"');
    for (const r of refused) {
      await expectError(r, 429, "rate_limited");
      expect([
        r.headers.get("ETag"),
        r.headers.get("Link"),
        r.headers.get("x-d1-bookmark"),
      ]).toEqual([null, null, null]);
      expect(r.headers.get("X-RateLimit-Remaining")).toBe("0");
    }
  });
});

describe("which reads run alongside the limiter call", () => {
  /** env.DB (and the sessions it opens), noting each query of the pets table. */
  function notingPetReads(onRead: () => void = () => {}) {
    const petReads: string[] = [];
    const noting = <T extends D1Database | D1DatabaseSession>(db: T): T =>
      new Proxy(db, {
        get: (target, prop) => {
          if (prop === "prepare")
            return (sql: string) => {
              if (/FROM pets/i.test(sql)) {
                petReads.push(sql);
                onRead();
              }
              return target.prepare(sql);
            };
          if (prop === "withSession")
            return (bookmark?: string) => noting((target as D1Database).withSession(bookmark));
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    return { db: noting(env.DB), petReads };
  }
  // A fresh page-cache epoch per request: every read goes to D1.
  const readWith = (bindings: object, key: string) =>
    callWith({ ...bindings, PAGE_CACHE_EPOCH: crypto.randomUUID() }, "/v1/pets?limit=1", {
      headers: auth(key),
    });

  it("a key its last decision left without room is decided first: its refused read reads nothing from D1", async () => {
    const k = await issueKey("enterprise", { perMinute: 2, perDay: 100 });
    const { db, petReads } = notingPetReads();
    expect((await readWith({ DB: db }, k.key)).status).toBe(200); // 1 left
    expect((await readWith({ DB: db }, k.key)).status).toBe(200); // 0 left in the minute
    const before = petReads.length;
    expect(before).toBeGreaterThanOrEqual(2);
    await expectError(await readWith({ DB: db }, k.key), 429, "rate_limited");
    expect(petReads).toHaveLength(before);
  });

  it("a banned key is decided first, even in a minute whose windows have room", async () => {
    const k = await issueKey("enterprise", { perMinute: 2, perDay: 100 });
    const { db, petReads } = notingPetReads();
    for (let i = 0; i < 2; i++) expect((await readWith({ DB: db }, k.key)).status).toBe(200);
    // Refused past the ban threshold (10 refusals in a minute): banned for BAN_MINUTES.
    let refused = await readWith({ DB: db }, k.key);
    for (let i = 0; i < 10; i++) refused = await readWith({ DB: db }, k.key);
    await expectError(refused, 429, "key_banned");
    time.now += MINUTE_MS; // a new minute: both windows have room, and the ban lasts
    const before = petReads.length;
    for (let i = 0; i < 2; i++)
      await expectError(await readWith({ DB: db }, k.key), 429, "key_banned");
    const { minute, day } = await env.QUOTA.getByName(k.id).usage();
    expect([minute.count, day.count], "the windows have room").toEqual([0, 2]);
    expect(petReads, "no read ran alongside the decision").toHaveLength(before);
  });

  it("a key its last decision left room starts its read before the limiter has answered", async () => {
    const k = await issueKey("enterprise", { perMinute: 5, perDay: 100 });
    let readStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      readStarted = resolve;
    });
    const { db } = notingPetReads(() => readStarted());
    // The key's object answers once the read has started, or after 500 ms: which came first?
    const order: string[] = [];
    const quota = {
      getByName: (name: string) => {
        const stub = env.QUOTA.getByName(name);
        return new Proxy(stub, {
          get: (target, prop) =>
            prop === "admit"
              ? async (...args: Parameters<typeof stub.admit>) => {
                  order.push(
                    await Promise.race([
                      started.then(() => "read started"),
                      new Promise<string>((r) => setTimeout(() => r("no read"), 500)),
                    ]),
                  );
                  return target.admit(...args);
                }
              : Reflect.get(target, prop),
        });
      },
    };
    expect((await readWith({ DB: env.DB, QUOTA: quota }, k.key)).status).toBe(200);
    expect(order, "the key's first request is decided first").toEqual(["no read"]);
    expect((await readWith({ DB: db, QUOTA: quota }, k.key)).status).toBe(200);
    expect(order, "room left: the read ran alongside").toEqual(["no read", "read started"]);
  });
});

describe("a read refused while it ran", () => {
  it("has exactly the headers of a read refused before it ran", async () => {
    const k = await issueKey("enterprise", { perMinute: 3, perDay: 100 });
    await postJson("/v1/pets", { name: "a", categoryId: 1 }, auth(k.key));
    expect((await call("/v1/pets?limit=1", { headers: auth(k.key) })).status).toBe(200); // room left: the next read is speculative
    const rec = (await getKey(env.DB, k.id))!;
    await env.QUOTA.getByName(k.id).admit(policyOf(rec)); // the last request, spent behind this isolate's back
    const names = (r: Response) =>
      [...r.headers.keys()].filter((n) => n !== "server-timing").sort();
    const speculative = await call("/v1/pets?limit=1", { headers: auth(k.key) });
    const decidedFirst = await call("/v1/pets?limit=1", { headers: auth(k.key) });
    expect([speculative.status, decidedFirst.status]).toEqual([429, 429]);
    expect(names(speculative)).toEqual(names(decidedFirst));
    expect(await speculative.json()).toEqual(await decidedFirst.json());
  });
});

describe("writes are decided before they run", () => {
  it("a create by a key that had room when last seen, refused now, stores nothing", async () => {
    const k = await issueKey("enterprise", { perMinute: 3, perDay: 100 });
    expect((await list(k.key)).status).toBe(200); // 2 left: this isolate notes room for the key
    const rec = (await getKey(env.DB, k.id))!;
    const object = env.QUOTA.getByName(k.id);
    // The minute's last 2 requests, spent behind this isolate's back.
    for (let i = 0; i < 2; i++) expect((await object.admit(policyOf(rec))).outcome).toBe("allowed");
    const name = `decided-first-${crypto.randomUUID()}`;
    await expectError(
      await postJson("/v1/pets", { name, categoryId: 1 }, auth(k.key)),
      429,
      "rate_limited",
    );
    const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM pets WHERE name = ?1")
      .bind(name)
      .first<{ n: number }>();
    expect(stored!.n).toBe(0);
  });
});
