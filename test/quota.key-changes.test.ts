// A change to a key reaches every copy of it within CHANGE_APPLIES_WITHIN_MS: a warm isolate's
// cached record (up to 30 s old), a location holder's copy, with or without a lease there. The
// isolate that "made" a change forgets its copy at once, so a change made elsewhere is played
// here by putting the copy back in this isolate's cache after the admin API answered.
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { cachedKey, cacheKey, forgetKey } from "../src/auth/key-cache";
import { MINUTE_MS } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import { MOST_REREADS } from "../src/middleware/enforce-quota";
import { HeldKeyRecord } from "../src/objects/holder-key-record";
import { holderName } from "../src/objects/quota-holder";
import { CHANGE_APPLIES_WITHIN_MS, GIVE_BACK_GRACE_MS } from "../src/quota/lease";
import { PLAN_LIMITS } from "../src/quota/plans";
import { backgroundWork } from "./background-work";
import {
  ADMIN,
  auth,
  BASE,
  call,
  callWith,
  closedGate,
  dbWithReads,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);
const { passTime } = backgroundWork(time);
let seq = 0;

beforeEach(() => {
  for (const level of ["log", "warn"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});

/** A request with `key` arriving in location `colo` (none: decided by the key's object). */
function located(key: string, colo: string | null, path = "/v1/pets?limit=1"): Request {
  return new Request(`${BASE}${path}`, {
    headers: auth(key, { "CF-Connecting-IP": `198.51.100.${++seq % 250}` }),
    ...(colo ? { cf: { colo } } : {}),
  } as RequestInit);
}
const send = (key: string, colo: string | null, path?: string) =>
  callWith({}, located(key, colo, path));

/**
 * Makes `change` as the admin API of another isolate would: this isolate keeps the copy of the
 * key it cached for `key` (the admin API forgets it here, which another isolate's would not).
 */
async function elsewhere<T>(key: string, change: () => Promise<T>): Promise<T> {
  const hash = await sha256Hex(key);
  const kept = cachedKey(hash, time.now);
  expect(kept, "this isolate holds a copy of the key").toBeDefined();
  const cachedAt = time.now;
  const result = await change();
  cacheKey(hash, kept!.match, cachedAt);
  return result;
}

/** A D1 read of a key by a secret's hash (findKeyByHash): the Worker's, a holder's. */
const isReadByHash = (sql: string) => sql.includes("FROM retired_key_secrets WHERE key_hash");

const rollWithoutGrace = async (id: string): Promise<string> => {
  const res = await postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
  expect(res.status).toBe(201);
  return ((await res.json()) as { key: string }).key;
};

describe("a warm isolate's copy of a key older than a change made elsewhere", () => {
  it.each([
    ["through its location's holder", "AMS"],
    ["decided by the key's object", null],
  ])("a roll with no grace: the old secret is refused at its next request, %s", async (_, colo) => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(key, colo)).status).toBe(200);
    await elsewhere(key, () => rollWithoutGrace(id));
    time.now += 10_000; // well within the key cache's 30 s
    const refused = await expectError(await send(key, colo), 401, "unauthorized");
    expect(refused.message).toMatch(/rolled/);
  });

  it("a roll with no grace: the old secret is refused even where the new one has stock already", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(key, "AMS")).status).toBe(200);
    const rolled = await elsewhere(key, () => rollWithoutGrace(id));
    time.now += 100;
    expect((await send(rolled, "AMS")).status).toBe(200);
    const holder = env.QUOTA_HOLDER.getByName(holderName(id, "AMS"));
    expect(await holder.unusedPermits()).toBeGreaterThan(0); // granted under the rolled key
    time.now += 100;
    await expectError(await send(key, "AMS"), 401, "unauthorized");
  });

  it("the expiry moved earlier: refused once it has passed, not up to 30 s later", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(key, "AMS")).status).toBe(200);
    const soon = new Date(time.now + 3_000).toISOString();
    await elsewhere(key, async () =>
      expect((await patchKey(id, { expiresAt: soon })).status).toBe(200),
    );
    time.now += 3_000;
    const refused = await expectError(await send(key, "AMS"), 401, "unauthorized");
    expect(refused.message).toMatch(/expired/);
  });

  it("GET /v1/usage for a key revoked elsewhere is refused, and so is a secret rolled out elsewhere", async () => {
    const revokedKey = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(revokedKey.key, "AMS")).status).toBe(200);
    await elsewhere(revokedKey.key, async () =>
      expect(
        (await call(`/admin/v1/keys/${revokedKey.id}`, { method: "DELETE", headers: ADMIN }))
          .status,
      ).toBe(200),
    );
    const revoked = await expectError(
      await send(revokedKey.key, "AMS", "/v1/usage"),
      401,
      "unauthorized",
    );
    expect(revoked.message).toMatch(/revoked/);

    const rolledKey = await issueKey("free");
    expect((await send(rolledKey.key, "AMS")).status).toBe(200);
    await elsewhere(rolledKey.key, () => rollWithoutGrace(rolledKey.id));
    const rolled = await expectError(
      await send(rolledKey.key, "AMS", "/v1/usage"),
      401,
      "unauthorized",
    );
    expect(rolled.message).toMatch(/rolled/);
  });
});

describe(`a change applies within CHANGE_APPLIES_WITHIN_MS (${CHANGE_APPLIES_WITHIN_MS} ms) everywhere`, () => {
  it("is 2 s", () => expect(CHANGE_APPLIES_WITHIN_MS).toBe(2_000));

  it.each([
    ["a warm isolate", "warm"],
    ["a cold isolate, through the holder that refused it", "cold"],
  ])("enabling a key again reaches %s", async (_, isolate) => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(key, "CDG")).status).toBe(200);
    expect((await patchKey(id, { enabled: false })).status).toBe(200);
    await expectError(await send(key, "CDG"), 401, "unauthorized"); // cached as refused
    await elsewhere(key, async () =>
      expect((await patchKey(id, { enabled: true })).status).toBe(200),
    );
    if (isolate === "cold") forgetKey(id);
    time.now += CHANGE_APPLIES_WITHIN_MS;
    expect((await send(key, "CDG")).status).toBe(200);
  });

  it("clearing an expiry reaches a warm isolate that refused the key as expired", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    const soon = new Date(time.now + 1_000).toISOString();
    expect((await patchKey(id, { expiresAt: soon })).status).toBe(200);
    time.now += 1_000;
    await expectError(await send(key, "CDG"), 401, "unauthorized");
    await elsewhere(key, async () =>
      expect((await patchKey(id, { expiresAt: null })).status).toBe(200),
    );
    time.now += CHANGE_APPLIES_WITHIN_MS;
    expect((await send(key, "CDG")).status).toBe(200);
  });
});

describe("a location holder's copy of its key", () => {
  it("a roll with no grace at a holder with no lease that met the new secret first: the old one is refused there", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(key, "GRU")).status).toBe(200);
    time.now += 10_000; // its stock's lease is over: the roll is pushed to nobody there
    await passTime();
    const rolled = await rollWithoutGrace(id);
    forgetKey(id);
    expect((await send(rolled, "GRU")).status).toBe(200);
    forgetKey(id);
    const old = await expectError(await send(key, "GRU"), 401, "unauthorized");
    expect(old.message).toMatch(/rolled/);
  });

  it("an expiry that passes while it keeps its copy, moved later meanwhile with no lease there to tell: the key is read again, not refused", async () => {
    // The key-record model's counterexample for the isolate's cache, played at a holder.
    const { id, key } = await issueKey("free");
    time.now = T0 + 50_000;
    const at = (ms: number) => new Date(ms).toISOString();
    expect((await patchKey(id, { expiresAt: at(T0 + 75_000) })).status).toBe(200);
    forgetKey(id);
    expect((await send(key, "JNB")).status).toBe(200); // the holder reads its copy
    time.now = T0 + MINUTE_MS + 1_000; // its stock ended with its minute: no push reaches it
    expect((await patchKey(id, { expiresAt: at(T0 + 10 * MINUTE_MS) })).status).toBe(200);
    time.now = T0 + 76_000; // the old expiry has passed; the copy is 26 s old
    forgetKey(id);
    expect((await send(key, "JNB")).status).toBe(200);
  });

  it("a D1 read still in flight when the key changes is used for its own request, never kept", async () => {
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const { gate, open } = closedGate();
    const slowDb = dbWithReads(async (first) => {
      await gate;
      return first();
    });
    const copy = new HeldKeyRecord();
    const reading = copy.read(slowDb, id, hash, T0);
    copy.forget(); // the key's object told the holder of a change
    open();
    expect((await reading)?.record.id).toBe(id);
    expect(copy.cached(hash, T0)).toBeNull();
    expect(copy.vouchedFor(hash, T0)).toBeNull();
    // And the next read is kept.
    expect((await copy.read(env.DB, id, hash, T0))?.record.id).toBe(id);
    expect(copy.cached(hash, T0)?.record.id).toBe(id);
  });

  it("the stock taken as a minute begins, by a key that then goes quiet, is back GIVE_BACK_GRACE_MS after that minute", async () => {
    const { id, key } = await issueKey("free");
    // Two requests 10 s apart: too often for standing permits (test/quota.standing-permits.test.ts).
    time.now = T0 + 40_000;
    expect((await send(key, "NRT")).status).toBe(200);
    await passTime();
    time.now = T0 + 50_000;
    expect((await send(key, "NRT")).status).toBe(200);
    const holder = env.QUOTA_HOLDER.getByName(holderName(id, "NRT"));
    const object = env.QUOTA.getByName(id);
    time.now = T0 + 56_000; // a key far from its limits: its stock lives to its minute's end
    await passTime();
    await passTime();
    expect(await holder.unusedPermits()).toBeGreaterThan(0);
    time.now = T0 + MINUTE_MS; // the refill, which takes the first stock back
    await passTime();
    expect(await holder.unusedPermits()).toBeGreaterThan(0);
    expect((await object.usage()).minute.count).toBeGreaterThan(0);
    expect((await object.usage()).day.count, "the requests and the new stock").toBe(
      2 + (await holder.unusedPermits()),
    );
    time.now = T0 + 2 * MINUTE_MS - 1;
    await passTime();
    expect(await holder.unusedPermits()).toBeGreaterThan(0);
    time.now = T0 + 2 * MINUTE_MS + GIVE_BACK_GRACE_MS;
    await passTime();
    await passTime();
    expect(await holder.unusedPermits()).toBe(0);
    expect((await object.usage()).day.count).toBe(2);
  });

  // Each D1 read of a key record by a secret's hash, wherever it is made (not the webhook
  // queue's consumer reading a key by id for an event an earlier test queued).
  const keyReadsSince = () => {
    const prepare = vi.spyOn(env.DB, "prepare");
    return () => prepare.mock.calls.filter(([sql]) => isReadByHash(sql)).length;
  };

  it("a cold isolate's request is authenticated by one D1 read at its holder, the next one's by none", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    const keyReads = keyReadsSince();
    forgetKey(id);
    expect((await send(key, "AMS")).status).toBe(200);
    expect(keyReads(), "the holder reads the key once, and its decision vouches for it").toBe(1);
    time.now += 1_000;
    forgetKey(id); // another cold isolate in the same location
    expect((await send(key, "AMS")).status).toBe(200);
    expect(keyReads(), "the holder's copy, of the version the object decided under").toBe(1);
  });

  it("a newer version found as the holder marks a key used is pushed to the key's object before the answer", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    // The holder meets the key (GET /v1/usage decides nothing and marks nothing used)...
    forgetKey(id);
    expect((await send(key, "AMS", "/v1/usage")).status).toBe(200);
    // ...then the plan changes while the key is still unused: nothing is pushed anywhere.
    expect((await patchKey(id, { plan: "pro" })).status).toBe(200);
    const { version } = (await env.DB.prepare("SELECT version FROM api_keys WHERE id = ?")
      .bind(id)
      .first<{ version: number }>())!;
    // The first request is decided under the holder's older copy; marking the key used finds
    // the newer version, which the Worker pushes to the key's object before it answers.
    forgetKey(id);
    expect((await send(key, "AMS")).status).toBe(200);
    const usage = await env.QUOTA.getByName(id).usage();
    expect(usage.policy?.version).toBe(version);
    expect(usage.minute.limit).toBe(PLAN_LIMITS.pro.perMinute);
  });

  it.each([
    ["a holder that never met the key", false],
    ["a holder holding a copy of the key", true],
  ])("a wrong secret under a genuine tag costs one D1 read, at %s", async (_, holderHasCopy) => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    if (holderHasCopy) expect((await send(key, "AMS")).status).toBe(200);
    const forged = `pet_test_${"x".repeat(43)}${key.slice("pet_test_".length + 43)}`;
    const prepare = vi.spyOn(env.DB, "prepare");
    forgetKey(id);
    await expectError(await send(forged, "AMS"), 401, "unauthorized");
    const keyReads = prepare.mock.calls.filter(([sql]) => isReadByHash(sql));
    expect(keyReads).toHaveLength(1);
  });
});

describe(`a key that changes again on every re-read: read again ${MOST_REREADS} times, then 503`, () => {
  it("is read again a bounded number of times, nothing counted, then answered 503 to repeat", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await send(key, null)).status).toBe(200); // this isolate caches the key
    // The key's object knows a version D1 never gets to: each re-read is older again.
    const object = env.QUOTA.getByName(id);
    const { policy } = await object.usage();
    await object.configure({ ...policy!, version: policy!.version + 100 });
    const counted = (await object.usage()).minute.count;
    // Counts the re-reads, and ends them a few past the bound (a loop without one would not end).
    const prepare = env.DB.prepare.bind(env.DB);
    let rereads = 0;
    vi.spyOn(env.DB, "prepare").mockImplementation((sql) => {
      if (isReadByHash(sql) && ++rereads > MOST_REREADS + 2)
        throw new Error("read again without end");
      return prepare(sql);
    });
    const res = await send(key, null);
    await expectError(res, 503, "service_unavailable");
    expect(rereads).toBe(MOST_REREADS);
    expect((await object.usage()).minute.count, "stale asks count nothing").toBe(counted);
  });
});

describe("GET /v1/usage", () => {
  it("shows today's live count after an admin history read wrote an earlier one to D1", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    for (let i = 0; i < 2; i++) expect((await send(key, null)).status).toBe(200);
    const history = await call(`/admin/v1/keys/${id}/usage`, { headers: ADMIN });
    expect(history.status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await send(key, null)).status).toBe(200);
    const usage = await send(key, null, "/v1/usage");
    expect(usage.status).toBe(200);
    const body = (await usage.json()) as { days: { admitted: number }[] };
    expect(body.days.at(-1)?.admitted).toBe(5);
  });
});
