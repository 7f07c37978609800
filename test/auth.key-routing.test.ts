// Keys that name their id (src/auth/key-format.ts): a cold isolate checks the token's tag itself
// and routes the request to the key's holder in its location, which authenticates it from its
// copy of the key's record (read from D1 there on a miss) and decides it, in one local hop.
import { listDurableObjectIds } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { generateApiKey, hasGenuineTag, keyShapeOf, newKeyId } from "../src/auth/key-format";
import { insertKey } from "../src/db/keys";
import { randomBase62, sha256Hex } from "../src/lib/crypto";
import { HeldKeyRecord, REFUSING_COPY_TRUSTED_MS } from "../src/objects/holder-key-record";
import { holderName } from "../src/objects/quota-holder";
import { GIVE_BACK_GRACE_MS, STOCK_LEASE_MS } from "../src/quota/lease";
import { KeyIdParamSchema } from "../src/schemas/keys";
import { freezeBackgroundWork } from "./background-work";
import {
  ADMIN,
  auth,
  BASE,
  call,
  callWith,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  preparingDb,
  T0,
} from "./helpers";

const time = mockClock(T0);
let seq = 0;

beforeEach(freezeBackgroundWork);

/** What the isolate called: its D1 statements on key records (reads, first-use marks), its holder and limiter calls. */
function recordingBindings() {
  const keyDb = preparingDb((sql) => sql.includes("api_keys"));
  const keyQueries = keyDb.prepared;
  const holderCalls: string[] = [];
  const limiterCalls: string[] = [];
  const stubRecording = <T extends object>(stub: T, calls: string[]): T =>
    new Proxy(stub, {
      get: (target, prop) => {
        const value = Reflect.get(target, prop);
        if (typeof prop !== "string" || prop === "then" || typeof value !== "function")
          return value;
        return (...args: unknown[]) => {
          calls.push(prop);
          return Reflect.apply(value, target, args);
        };
      },
    });
  const bindings = {
    DB: keyDb.db,
    QUOTA_HOLDER: {
      getByName: (name: string) => stubRecording(env.QUOTA_HOLDER.getByName(name), holderCalls),
    },
    QUOTA: {
      getByName: (name: string) => stubRecording(env.QUOTA.getByName(name), limiterCalls),
    },
  };
  return { bindings, keyQueries, holderCalls, limiterCalls };
}

/** A request with `key` arriving in location `colo` from its own client address. */
function located(key: string, colo: string, path = "/v1/pets?limit=1"): Request {
  return new Request(`${BASE}${path}`, {
    headers: auth(key, { "CF-Connecting-IP": `203.0.113.${++seq % 250}` }),
    cf: { colo },
  } as RequestInit);
}

/** The request as an isolate that has never seen the key serves it. */
async function fromColdIsolate(
  keyId: string,
  key: string,
  colo: string,
  bindings: { [K in keyof Env]?: unknown } = {},
): Promise<Response> {
  forgetKey(keyId);
  return callWith(bindings, located(key, colo));
}

/** `key` with one hex digit of its tag changed. */
const withWrongTag = (key: string) => key.slice(0, -1) + (key.endsWith("0") ? "1" : "0");

const holderIds = async () =>
  (await listDurableObjectIds(env.QUOTA_HOLDER)).map((id) => id.toString());

describe("the key format", () => {
  const SECRET = "a-tag-secret-of-at-least-32-characters";
  const OTHER = "another-tag-secret-of-32-characters!";

  it("makes ids the admin API accepts as key ids, and nothing else passes for one", () => {
    for (let i = 0; i < 50; i++)
      expect(KeyIdParamSchema.safeParse({ id: newKeyId() }).success).toBe(true);
    for (const id of [
      "key_",
      "key_0123456789abcdefABC",
      "key_0123456789abcdefABCD_",
      "kez_0123456789abcdefABCD",
      "key_0123456789abcdef-BCD",
    ])
      expect(KeyIdParamSchema.safeParse({ id }).success, id).toBe(false);
  });

  it("names the key's id under a tag only the tag secret makes", async () => {
    const id = newKeyId();
    const { key, displayPrefix } = await generateApiKey("local", id, SECRET);
    expect(displayPrefix).toBe(key.slice(0, "pet_test_".length + 4));
    const shape = keyShapeOf(key);
    expect(shape?.keyId).toBe(id);
    const named = { keyId: id, tag: shape!.tag! };
    expect(await hasGenuineTag([SECRET], named)).toBe(true);
    expect(await hasGenuineTag([OTHER], named)).toBe(false);
    // During a rotation, a tag made under the previous secret still counts.
    expect(await hasGenuineTag([OTHER, SECRET], named)).toBe(true);
    // The tag belongs to its id: under another id, or altered, it counts for nothing.
    expect(await hasGenuineTag([SECRET], { ...named, keyId: newKeyId() })).toBe(false);
    expect(await hasGenuineTag([SECRET], keyShapeOf(withWrongTag(key)) as typeof named)).toBe(
      false,
    );
  });

  it("tells keys issued before (no routing part) from malformed tokens", () => {
    expect(keyShapeOf(`pet_live_${"a".repeat(43)}`)).toEqual({ keyId: null, tag: null });
    expect(keyShapeOf(`pet_live_${"a".repeat(43)}_${"b".repeat(20)}`)).toBeNull();
    expect(keyShapeOf(`pet_live_${"a".repeat(43)}_${"b".repeat(20)}_${"C".repeat(32)}`)).toBeNull();
    expect(keyShapeOf(`pet_prod_${"a".repeat(43)}_${"b".repeat(20)}_${"c".repeat(32)}`)).toBeNull();
  });
});

describe("a token whose tag is wrong", () => {
  it("is refused in the isolate: counted by the shield, no call to any holder, limiter or D1, no object made", async () => {
    const { id, key } = await issueKey("free");
    const before = await holderIds();
    const { bindings, keyQueries, holderCalls, limiterCalls } = recordingBindings();
    const res = await fromColdIsolate(id, withWrongTag(key), "AMS", bindings);
    await expectError(res, 401, "unauthorized");
    // A guess, counted in the client's failed-authentication window (30 a minute).
    expect(res.headers.get("X-RateLimit-Limit")).toBe("30");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("29");
    expect({ keyQueries, holderCalls, limiterCalls }).toEqual({
      keyQueries: [],
      holderCalls: [],
      limiterCalls: [],
    });
    // Through the real bindings too: the key's holder in that location is never created.
    await expectError(await fromColdIsolate(id, withWrongTag(key), "SIN"), 401, "unauthorized");
    expect(await holderIds()).toEqual(before);
    expect(
      (await holderIds()).includes(env.QUOTA_HOLDER.idFromName(holderName(id, "SIN")).toString()),
    ).toBe(false);
  });
});

describe("a cold isolate with a key that names its id", () => {
  it("authenticates and is decided by the key's holder in one local hop: no D1 read, no far call from the isolate", async () => {
    const { id, key } = await issueKey("free");
    const cold = recordingBindings();
    const first = await fromColdIsolate(id, key, "AMS", cold.bindings);
    expect(first.status).toBe(200);
    expect(first.headers.get("X-RateLimit-Remaining")).toBe("59");
    expect(cold.holderCalls).toEqual(["authenticateAndAdmit"]);
    expect(cold.keyQueries).toEqual([]);
    expect(cold.limiterCalls).toEqual([]);
    // The holder marked the key used (middleware/first-use.ts), so the isolate did not have to.
    const used = await env.DB.prepare("SELECT first_used_at AS at FROM api_keys WHERE id = ?1")
      .bind(id)
      .first<{ at: number | null }>();
    expect(used?.at).toBe(T0);

    // Warm now in this isolate: its own cache, and the holder decides as for any key.
    const warm = recordingBindings();
    const second = await callWith(warm.bindings, located(key, "AMS"));
    expect(second.status).toBe(200);
    expect(second.headers.get("X-RateLimit-Remaining")).toBe("58");
    expect(warm.holderCalls).toEqual(["admit"]);
    expect(warm.keyQueries).toEqual([]);
  });

  it("the holder authenticates from its own copy of the key: another cold isolate there needs no D1 read anywhere", async () => {
    const { id, key } = await issueKey("free");
    expect((await fromColdIsolate(id, key, "FRA")).status).toBe(200);
    // D1 no longer knows this secret: only the holder's copy can authenticate it now.
    await env.DB.prepare("UPDATE api_keys SET key_hash = 'moved' WHERE id = ?1").bind(id).run();
    const res = await fromColdIsolate(id, key, "FRA");
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("58");
    // Another location's holder has no copy, and reads D1 (which no longer has the secret).
    await expectError(await fromColdIsolate(id, key, "SIN"), 401, "unauthorized");
    await env.DB.prepare("UPDATE api_keys SET key_hash = ?2 WHERE id = ?1")
      .bind(id, await sha256Hex(key))
      .run();
  });

  it("a wrong secret under a genuine tag is a guess, at a holder with a copy of the key too: 401, counted by the shield", async () => {
    const { id, key } = await issueKey("free");
    expect((await fromColdIsolate(id, key, "AMS")).status).toBe(200); // the holder has a copy
    const forged = `pet_test_${randomBase62(43)}${key.slice("pet_test_".length + 43)}`;
    const res = await fromColdIsolate(id, forged, "AMS");
    await expectError(res, 401, "unauthorized");
    expect(res.headers.get("X-RateLimit-Limit")).toBe("30");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("29");
  });

  it("GET /v1/usage authenticates at the holder without counting a request", async () => {
    const { id, key } = await issueKey("free");
    const { bindings, holderCalls, keyQueries } = recordingBindings();
    forgetKey(id);
    const res = await callWith(bindings, located(key, "AMS", "/v1/usage"));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { windows: { minute: { used: number } } };
    expect(body.windows.minute.used).toBe(0);
    expect(holderCalls[0]).toBe("authenticate");
    expect(keyQueries).toEqual([]);
  });
});

describe("a holder's copy of its key (HeldKeyRecord)", () => {
  it("requests arriving together with a secret it has not met share one D1 read, and then none", async () => {
    const { id, key } = await issueKey("free");
    const { db, prepared: reads } = preparingDb();
    const copy = new HeldKeyRecord();
    const hash = await sha256Hex(key);
    const matches = await Promise.all(
      Array.from({ length: 10 }, () => copy.read(db, id, hash, T0)),
    );
    expect(matches.map((m) => m?.record.id)).toEqual(Array(10).fill(id));
    expect(reads).toHaveLength(1);
    expect(copy.cached(hash, T0)?.secret).toBe("current");
    expect(copy.cached(await sha256Hex(`${key}x`), T0)).toBeNull();
    // Vouched for a lease's lifetime after the read, then no longer (GET /v1/usage reads again).
    expect(copy.vouchedFor(hash, T0 + STOCK_LEASE_MS - 1)).not.toBeNull();
    expect(copy.vouchedFor(hash, T0 + STOCK_LEASE_MS)).toBeNull();
    copy.forget();
    expect(copy.cached(hash, T0)).toBeNull();
  });
});

describe("a key's holder that cannot be reached", () => {
  it("the isolate reads the key from D1 itself, and the key's object decides: counted, not failing open", async () => {
    const { id, key } = await issueKey("free");
    const { bindings, keyQueries, limiterCalls } = recordingBindings();
    const unreachable = {
      getByName: () => ({
        authenticateAndAdmit: () => Promise.reject(new Error("the location holder is unreachable")),
        admit: () => Promise.reject(new Error("the location holder is unreachable")),
      }),
    };
    const res = await fromColdIsolate(id, key, "AMS", { ...bindings, QUOTA_HOLDER: unreachable });
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("59");
    expect(res.headers.get("RateLimit-Policy")).toMatch(/^"minute"/);
    expect(keyQueries.filter((sql) => sql.includes("FROM api_keys WHERE key_hash"))).toHaveLength(
      1,
    );
    expect(limiterCalls).toEqual(["admit"]);
  });
});

describe("keys issued before keys named their id", () => {
  it("keep working through D1, and are decided by their location's holder", async () => {
    const id = newKeyId();
    const key = `pet_test_${randomBase62(43)}`;
    await insertKey(env.DB, {
      id,
      name: "issued before",
      hash: await sha256Hex(key),
      prefix: key.slice(0, 13),
      plan: "free",
      ownLimits: null,
      expiresAt: null,
      now: T0,
    });
    const { bindings, keyQueries, holderCalls } = recordingBindings();
    const res = await fromColdIsolate(id, key, "AMS", bindings);
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("59");
    expect(keyQueries.filter((sql) => sql.includes("FROM api_keys WHERE key_hash"))).toHaveLength(
      1,
    );
    expect(holderCalls).toEqual(["admit"]);
    // A made-up key of the old shape is still a guess, found nowhere.
    await expectError(
      await fromColdIsolate(id, `pet_test_${randomBase62(43)}`, "AMS"),
      401,
      "unauthorized",
    );
  });
});

describe("KEY_TAG_SECRET", () => {
  it("rotated: keys tagged under the previous secret still route; once it is removed they are refused", async () => {
    const { id, key } = await issueKey("free");
    const NEW = "a-newer-tag-secret-of-32-characters!";
    const rotating = { KEY_TAG_SECRET: NEW, KEY_TAG_SECRET_PREVIOUS: env.KEY_TAG_SECRET };
    const during = recordingBindings();
    const res = await fromColdIsolate(id, key, "AMS", { ...during.bindings, ...rotating });
    expect(res.status).toBe(200);
    expect(during.keyQueries).toEqual([]);
    const after = recordingBindings();
    const refused = await fromColdIsolate(id, key, "AMS", {
      ...after.bindings,
      KEY_TAG_SECRET: NEW,
    });
    await expectError(refused, 401, "unauthorized");
    expect(after.holderCalls).toEqual([]);
  });

  it("unset: keys that name their id authenticate through D1, and no key can be issued", async () => {
    const { id, key } = await issueKey("free");
    const { bindings, keyQueries } = recordingBindings();
    const res = await fromColdIsolate(id, key, "AMS", { ...bindings, KEY_TAG_SECRET: "" });
    expect(res.status).toBe(200);
    expect(keyQueries.filter((sql) => sql.includes("FROM api_keys WHERE key_hash"))).toHaveLength(
      1,
    );
    const count = async () =>
      (await env.DB.prepare("SELECT COUNT(*) AS n FROM api_keys").first<{ n: number }>())!.n;
    const keys = await count();
    const issue = await callWith(
      { KEY_TAG_SECRET: "" },
      new Request(`${BASE}/admin/v1/keys`, {
        method: "POST",
        headers: { ...ADMIN, "Content-Type": "application/json" },
        body: JSON.stringify({ name: "no tag secret", plan: "free" }),
      }),
    );
    await expectError(issue, 500, "internal_error");
    expect(await count()).toBe(keys);
  });
});

describe("a change to a key reaches the holders' copies", () => {
  const revoke = async (id: string) =>
    expect((await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN })).status).toBe(
      200,
    );

  it("revocation: a holder with stock refuses the key from its copy's next request, well within 2 s", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await fromColdIsolate(id, key, "AMS")).status).toBe(200);
    const holder = env.QUOTA_HOLDER.getByName(holderName(id, "AMS"));
    expect(await holder.unusedPermits()).toBeGreaterThan(0); // it admits from stock
    await revoke(id);
    // No time passes: the push, not the lease's end, stopped it.
    const refused = await expectError(await fromColdIsolate(id, key, "AMS"), 401, "unauthorized");
    expect(refused.message).toMatch(/revoked/);
    expect(await holder.unusedPermits()).toBe(0);
  });

  it("roll: the old secret's copy is dropped with the push, the new secret routes to the same holder", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await fromColdIsolate(id, key, "AMS")).status).toBe(200);
    const res = await postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
    expect(res.status).toBe(201);
    const rolled = ((await res.json()) as { key: string }).key;
    const old = await expectError(await fromColdIsolate(id, key, "AMS"), 401, "unauthorized");
    expect(old.message).toMatch(/rolled/);
    const viaNew = await fromColdIsolate(id, rolled, "AMS");
    expect(viaNew.status).toBe(200);
    expect(viaNew.headers.get("X-RateLimit-Remaining")).toBe("58");
  });

  it("a holder the change was not pushed to (its lease over) asks the key's object, and reads the key again", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await fromColdIsolate(id, key, "IAD")).status).toBe(200);
    // Its stock's lease has ended: the key's object no longer counts it among its holders.
    time.now += STOCK_LEASE_MS + GIVE_BACK_GRACE_MS + 1_000;
    expect((await patchKey(id, { plan: "pro" })).status).toBe(200);
    const res = await fromColdIsolate(id, key, "IAD");
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Limit")).toBe("300");
    // The isolate was handed the key as it is now (what GET /v1/usage reports from its cache).
    const usage = await callWith({}, located(key, "IAD", "/v1/usage"));
    expect(((await usage.json()) as { plan: string }).plan).toBe("pro");

    time.now += STOCK_LEASE_MS + GIVE_BACK_GRACE_MS + 1_000;
    await revoke(id);
    await expectError(await fromColdIsolate(id, key, "IAD"), 401, "unauthorized");
  });

  it("a roll not pushed to a holder (its lease over): the old secret is refused there at its next request", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await fromColdIsolate(id, key, "GRU")).status).toBe(200);
    time.now += STOCK_LEASE_MS + GIVE_BACK_GRACE_MS + 1_000;
    const res = await postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds: 0 }, ADMIN);
    expect(res.status).toBe(201);
    const old = await expectError(await fromColdIsolate(id, key, "GRU"), 401, "unauthorized");
    expect(old.message).toMatch(/rolled/);
  });

  it("enabling a key reaches a holder whose copy refused it (no lease, so no push): its copy is read again once older than REFUSING_COPY_TRUSTED_MS", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await fromColdIsolate(id, key, "CDG")).status).toBe(200);
    expect((await patchKey(id, { enabled: false })).status).toBe(200);
    const refused = await expectError(await fromColdIsolate(id, key, "CDG"), 401, "unauthorized");
    expect(refused.message).toMatch(/disabled/);
    const holder = env.QUOTA_HOLDER.getByName(holderName(id, "CDG"));
    expect(await holder.unusedPermits()).toBe(0); // no stock: the key's object tells it nothing
    expect((await patchKey(id, { enabled: true })).status).toBe(200);
    time.now += REFUSING_COPY_TRUSTED_MS;
    const res = await fromColdIsolate(id, key, "CDG");
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("58");
  });

  it("GET /v1/usage at a holder whose copy nobody has vouched for within STOCK_LEASE_MS reads the key again", async () => {
    const { id, key } = await issueKey("free");
    time.now = T0 + 1_000;
    expect((await fromColdIsolate(id, key, "SYD")).status).toBe(200);
    time.now += STOCK_LEASE_MS + GIVE_BACK_GRACE_MS + 1_000;
    expect((await patchKey(id, { plan: "pro" })).status).toBe(200);
    forgetKey(id);
    const usage = await callWith({}, located(key, "SYD", "/v1/usage"));
    expect(((await usage.json()) as { plan: string }).plan).toBe("pro");
  });
});
