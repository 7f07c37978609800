import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { WRITE_ATTEMPTS } from "../src/routes/admin/write-while-unchanged";
import {
  ADMIN,
  auth,
  call,
  callWith,
  expectError,
  fixClock,
  issueKey,
  keyDetail,
  patchKey,
  postJson,
} from "./helpers";

const UNKNOWN_ID = "key_AAAAAAAAAAAAAAAAAAAA";
const SECRET_FIELDS = ["key", "hash", "keyHash", "key_hash", "secret"];

type KeyView = {
  id: string;
  name: string;
  prefix: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
  status: string;
  createdAt: string;
  updatedAt: string;
  revokedAt: string | null;
  expiresAt: string | null;
};

const create = (body: unknown, headers: Record<string, string> = ADMIN) =>
  postJson("/admin/v1/keys", body, headers);

describe("admin authentication", () => {
  it.each([
    ["no header", {}],
    ["wrong token", { Authorization: "Bearer not-the-admin-token" }],
    ["admin token with another scheme", { Authorization: `Basic ${env.ADMIN_TOKEN}` }],
    ["admin token with a suffix", { Authorization: `Bearer ${env.ADMIN_TOKEN}X` }],
  ])("%s → 401 on every operation", async (_label, headers: Record<string, string>) => {
    await expectError(await call("/admin/v1/keys", { headers }), 401, "unauthorized");
    await expectError(await call(`/admin/v1/keys/${UNKNOWN_ID}`, { headers }), 401, "unauthorized");
    await expectError(await create({ name: "x", plan: "pro" }, headers), 401, "unauthorized");
    await expectError(
      await call(`/admin/v1/keys/${UNKNOWN_ID}`, { method: "DELETE", headers }),
      401,
      "unauthorized",
    );
  });

  it("an API key is not an admin token", async () => {
    const { key } = await issueKey();
    await expectError(await call("/admin/v1/keys", { headers: auth(key) }), 401, "unauthorized");
  });
});

describe("POST /admin/v1/keys", () => {
  it.each([
    ["free", 60, 1_000],
    ["pro", 300, 10_000],
    ["business", 1_000, 100_000],
  ])("%s keys take the plan table's limits", async (plan, perMinute, perDay) => {
    const res = await create({ name: `acme-${plan}`, plan });
    expect(res.status).toBe(201);
    const body = (await res.json()) as KeyView & { key: string };
    expect(body).toMatchObject({
      name: `acme-${plan}`,
      plan,
      limits: { perMinute, perDay },
      status: "active",
      revokedAt: null,
      expiresAt: null,
    });
    expect(body.id).toMatch(/^key_[0-9A-Za-z]{20}$/);
    expect(body.key).toMatch(/^pet_test_[0-9A-Za-z]{43}_[0-9A-Za-z]{20}_[0-9a-f]{32}$/);
    expect(body.key.startsWith(body.prefix)).toBe(true);
    expect(Date.parse(body.createdAt)).not.toBeNaN();
    expect(res.headers.get("Location")).toBe(`/admin/v1/keys/${body.id}`);
  });

  it("enterprise keys carry their own limits, which are required", async () => {
    const res = await create({
      name: "big",
      plan: "enterprise",
      limits: { perMinute: 5_000, perDay: 2_000_000 },
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({
      plan: "enterprise",
      limits: { perMinute: 5_000, perDay: 2_000_000 },
    });
    const err = await expectError(
      await create({ name: "big", plan: "enterprise" }),
      400,
      "invalid_request",
    );
    expect(err.message).toContain("limits");
  });

  it("a future expiresAt is stored", async () => {
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const res = await create({ name: "temp", plan: "free", expiresAt: at });
    expect(res.status).toBe(201);
    expect(((await res.json()) as KeyView).expiresAt).toBe(at);
  });

  it.each([
    [
      "limits on a non-enterprise plan",
      { name: "x", plan: "pro", limits: { perMinute: 1, perDay: 1 } },
      "limits",
    ],
    ["unknown plan", { name: "x", plan: "gold" }, "plan"],
    ["plan in another case", { name: "x", plan: "Pro" }, "plan"],
    ["missing plan", { name: "x" }, "plan"],
    ["missing name", { plan: "pro" }, "name"],
    ["empty name", { name: " ", plan: "pro" }, "name"],
    [
      "expiresAt in the past",
      { name: "x", plan: "pro", expiresAt: "2020-01-01T00:00:00Z" },
      "expiresAt",
    ],
    ["expiresAt not a date", { name: "x", plan: "pro", expiresAt: "tomorrow" }, "expiresAt"],
    [
      "zero limits",
      { name: "x", plan: "enterprise", limits: { perMinute: 0, perDay: 10 } },
      "perMinute",
    ],
    [
      "fractional limits",
      { name: "x", plan: "enterprise", limits: { perMinute: 10, perDay: 1.5 } },
      "perDay",
    ],
    ["unknown field", { name: "x", plan: "pro", owner: "me" }, "owner"],
  ])("%s → 400 naming it", async (_label, body, field) => {
    const err = await expectError(await create(body), 400, "invalid_request");
    expect(err.message).toContain(field);
  });

  it("refuses non-JSON bodies with 415", async () => {
    const res = await call("/admin/v1/keys", {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "text/plain" },
      body: '{"name":"x","plan":"pro"}',
    });
    await expectError(res, 415, "unsupported_media_type");
  });
});

describe("GET /admin/v1/keys", () => {
  it("pages through every key with limit and nextCursor, never showing a secret or hash", async () => {
    const made = await Promise.all([issueKey("free"), issueKey("pro"), issueKey("business")]);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await call(
        `/admin/v1/keys?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        { headers: ADMIN },
      );
      expect(res.status).toBe(200);
      const text = await res.text();
      for (const { key } of made) expect(text).not.toContain(key);
      const page = JSON.parse(text) as {
        data: Array<Record<string, unknown>>;
        nextCursor: string | null;
      };
      expect(page.data.length).toBeLessThanOrEqual(2);
      for (const item of page.data)
        for (const f of SECRET_FIELDS) expect(item).not.toHaveProperty(f);
      seen.push(...page.data.map((k) => k.id as string));
      cursor = page.nextCursor;
      if (cursor) expect(page.data).toHaveLength(2);
      pages += 1;
    } while (cursor && pages < 50);
    expect(cursor).toBeNull();
    expect(pages).toBeGreaterThanOrEqual(2);
    expect(new Set(seen).size).toBe(seen.length);
    for (const { id } of made) expect(seen).toContain(id);
  });

  it("defaults to 20 and refuses bad limits and cursors", async () => {
    await Promise.all(Array.from({ length: 21 }, () => issueKey("free")));
    const page = (await (await call("/admin/v1/keys", { headers: ADMIN })).json()) as {
      data: unknown[];
      nextCursor: string | null;
    };
    expect(page.data).toHaveLength(20);
    expect(page.nextCursor).toEqual(expect.any(String));
    for (const limit of ["0", "101", "abc", "2.5"]) {
      const err = await expectError(
        await call(`/admin/v1/keys?limit=${limit}`, { headers: ADMIN }),
        400,
        "invalid_request",
      );
      expect(err.message).toContain("limit");
    }
    await expectError(
      await call("/admin/v1/keys?cursor=not-a-cursor", { headers: ADMIN }),
      400,
      "invalid_request",
    );
  });
});

describe("GET, PATCH, DELETE /admin/v1/keys/{id}", () => {
  it("GET returns the key with its current usage, no secret", async () => {
    // A fixed instant in the middle of a minute: the request and the read share its window.
    fixClock(Date.UTC(2030, 2, 4, 9, 17, 30));
    const { id, key } = await issueKey("pro");
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    const res = await keyDetail(id);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain(key);
    const body = JSON.parse(text) as KeyView & {
      usage: { minute: { count: number; limit: number }; day: { count: number; limit: number } };
    };
    for (const f of SECRET_FIELDS) expect(body).not.toHaveProperty(f);
    expect(body).toMatchObject({
      id,
      plan: "pro",
      status: "active",
      limits: { perMinute: 300, perDay: 10_000 },
    });
    expect(body.usage.minute).toMatchObject({ count: 1, limit: 300 });
    expect(body.usage.day).toMatchObject({ count: 1, limit: 10_000 });
  });

  it("PATCH changes name, plan and limits", async () => {
    const { id } = await issueKey("pro");
    const renamed = await patchKey(id, { name: "renamed" });
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).toMatchObject({
      id,
      name: "renamed",
      plan: "pro",
      limits: { perMinute: 300, perDay: 10_000 },
    });
    expect(await (await patchKey(id, { plan: "free" })).json()).toMatchObject({
      name: "renamed",
      plan: "free",
      limits: { perMinute: 60, perDay: 1_000 },
    });
    const ent = await patchKey(id, { plan: "enterprise", limits: { perMinute: 7, perDay: 70 } });
    expect(await ent.json()).toMatchObject({
      plan: "enterprise",
      limits: { perMinute: 7, perDay: 70 },
    });
    expect(
      await (await patchKey(id, { limits: { perMinute: 8, perDay: 80 } })).json(),
    ).toMatchObject({ plan: "enterprise", limits: { perMinute: 8, perDay: 80 } });
    const got = (await (await keyDetail(id)).json()) as KeyView;
    expect(got).toMatchObject({
      name: "renamed",
      plan: "enterprise",
      limits: { perMinute: 8, perDay: 80 },
    });
  });

  it("PATCH refuses invalid changes", async () => {
    const { id } = await issueKey("pro");
    expect(
      (await expectError(await patchKey(id, { plan: "enterprise" }), 400, "invalid_request"))
        .message,
    ).toContain("limits");
    expect(
      (
        await expectError(
          await patchKey(id, { limits: { perMinute: 1, perDay: 1 } }),
          400,
          "invalid_request",
        )
      ).message,
    ).toContain("limits");
    expect(
      (await expectError(await patchKey(id, { plan: "gold" }), 400, "invalid_request")).message,
    ).toContain("plan");
    expect(
      (await expectError(await patchKey(id, { colour: "red" }), 400, "invalid_request")).message,
    ).toContain("colour");
    await expectError(await patchKey(id, {}), 400, "invalid_request");
    const unchanged = (await (await keyDetail(id)).json()) as KeyView;
    expect(unchanged).toMatchObject({ plan: "pro", limits: { perMinute: 300, perDay: 10_000 } });
  });

  it("DELETE revokes; the key is refused from its very next request; repeating keeps revokedAt", async () => {
    const { id, key } = await issueKey("pro");
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    const res = await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN });
    expect(res.status).toBe(200);
    const revoked = (await res.json()) as KeyView;
    expect(revoked).toMatchObject({ id, status: "revoked" });
    expect(Date.parse(revoked.revokedAt!)).not.toBeNaN();
    await expectError(await call("/v1/pets", { headers: auth(key) }), 401, "unauthorized");
    const again = (await (
      await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN })
    ).json()) as KeyView;
    expect(again.revokedAt).toBe(revoked.revokedAt);
    expect(await (await keyDetail(id)).json()).toMatchObject({
      status: "revoked",
      revokedAt: revoked.revokedAt,
    });
  });

  it("404 for an unknown id, 400 for a malformed one", async () => {
    await expectError(await keyDetail(UNKNOWN_ID), 404, "not_found");
    await expectError(await patchKey(UNKNOWN_ID, { name: "x" }), 404, "not_found");
    await expectError(
      await call(`/admin/v1/keys/${UNKNOWN_ID}`, { method: "DELETE", headers: ADMIN }),
      404,
      "not_found",
    );
    for (const bad of ["abc", "key_short", "key_AAAAAAAAAAAAAAAAAAA-", "1"]) {
      const err = await expectError(await keyDetail(bad), 400, "invalid_request");
      expect(err.message).toContain("id");
      await expectError(
        await call(`/admin/v1/keys/${bad}`, { method: "DELETE", headers: ADMIN }),
        400,
        "invalid_request",
      );
      await expectError(await patchKey(bad, { name: "x" }), 400, "invalid_request");
    }
  });
});

describe("usage and unban", () => {
  it("a key that has not been used yet shows its plan's limits and windows that reset at the end of the current minute and day", async () => {
    const time = fixClock(Date.UTC(2030, 2, 4, 9, 18, 30));
    const k = await issueKey("business");
    const detail = (await (await keyDetail(k.id)).json()) as {
      usage: {
        minute: { count: number; limit: number; resetAt: string };
        day: { count: number; limit: number; resetAt: string };
      };
    };
    expect(detail.usage.minute).toMatchObject({ count: 0, limit: 1_000 });
    expect(detail.usage.day).toMatchObject({ count: 0, limit: 100_000 });
    expect(Date.parse(detail.usage.minute.resetAt)).toBe(time.now + 30_000);
    expect(detail.usage.day.resetAt).toBe("2030-03-05T00:00:00.000Z");
  });

  it("unban answers 503 with Retry-After when the key's quota object cannot be reached", async () => {
    const k = await issueKey("free");
    // Used once, so it has a quota object to ask (a key never used has none, and no ban).
    expect((await call("/v1/pets?limit=1", { headers: auth(k.key) })).status).toBe(200);
    const broken = {
      getByName: () => ({
        unban: () => Promise.reject(new Error("down")),
        usage: () => Promise.reject(new Error("down")),
      }),
    };
    const res = await callWith({ QUOTA: broken }, `/admin/v1/keys/${k.id}/unban`, {
      method: "POST",
      headers: ADMIN,
    });
    await expectError(res, 503, "service_unavailable");
    expect(res.headers.get("Retry-After")).toBe("1");
  });
});

/**
 * env.DB, but each of the first `races` reads of key `id` is followed by another admin's write to
 * that key (`SET otherWrite`; its version moves on), so a write decided on that read loses the
 * race.
 */
function dbLosingRaces(
  id: string,
  races: number,
  otherWrite = "version = version + 1",
): { db: D1Database; raced: () => number } {
  let left = races;
  const readsKey = (sql: string) => /^SELECT .* FROM api_keys WHERE id = \?1$/s.test(sql);
  const writeByAnother = () =>
    env.DB.prepare(`UPDATE api_keys SET ${otherWrite} WHERE id = ?1`).bind(id).run();
  const db = new Proxy(env.DB, {
    get: (target, prop) =>
      prop !== "prepare"
        ? Reflect.get(target, prop).bind(target)
        : (sql: string) => {
            const statement = target.prepare(sql);
            if (!readsKey(sql)) return statement;
            return {
              bind: (...values: unknown[]) => ({
                first: async () => {
                  const row = await statement.bind(...values).first();
                  if (left > 0) {
                    left--;
                    await writeByAnother();
                  }
                  return row;
                },
              }),
            };
          },
  });
  return { db, raced: () => races - left };
}

async function auditActionsOf(id: string): Promise<string[]> {
  const res = await call(`/admin/v1/audit?keyId=${id}&limit=100`, { headers: ADMIN });
  return ((await res.json()) as { data: { action: string }[] }).data.map((e) => e.action);
}

describe("an admin write that loses a race to another admin write", () => {
  const roll = (db: D1Database, id: string) =>
    callWith({ DB: db }, `/admin/v1/keys/${id}/roll`, {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ gracePeriodSeconds: 60 }),
    });
  const rename = (db: D1Database, id: string, name = "renamed") =>
    callWith({ DB: db }, `/admin/v1/keys/${id}`, {
      method: "PATCH",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ name }),
    });

  it("roll: is decided again on the fresh key, up to WRITE_ATTEMPTS attempts", async () => {
    const k = await issueKey("pro");
    const { db, raced } = dbLosingRaces(k.id, 2);
    const res = await roll(db, k.id);
    expect(res.status, await res.clone().text()).toBe(201);
    expect(raced()).toBe(2);
    const { key } = (await res.json()) as { key: string };
    expect((await call("/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
    expect(await auditActionsOf(k.id)).toEqual(["roll", "create"]);
  });

  it("roll: 503 when the key changed under each of the WRITE_ATTEMPTS attempts; nothing is written", async () => {
    const k = await issueKey("pro");
    const { db, raced } = dbLosingRaces(k.id, WRITE_ATTEMPTS);
    const res = await roll(db, k.id);
    const body = await expectError(res, 503, "service_unavailable");
    expect(body.message).toBe(
      "The key kept changing while this request tried to roll it; repeat it.",
    );
    expect(raced()).toBe(WRITE_ATTEMPTS);
    expect((await call("/v1/pets?limit=1", { headers: auth(k.key) })).status).toBe(200);
    expect(await auditActionsOf(k.id)).toEqual(["create"]);
  });

  it("roll: a key revoked by the write it lost to is refused (409) on the fresh read", async () => {
    const k = await issueKey("pro");
    const { db, raced } = dbLosingRaces(
      k.id,
      1,
      `revoked_at = ${Date.now()}, version = version + 1`,
    );
    const body = await expectError(await roll(db, k.id), 409, "key_revoked");
    expect(body.message).toMatch(/^The key was revoked at .*; a revoked key cannot be rolled\.$/);
    expect(raced()).toBe(1);
    expect(await auditActionsOf(k.id)).toEqual(["create"]);
  });

  it("change: is decided again on the fresh key; 503 after WRITE_ATTEMPTS lost races", async () => {
    const k = await issueKey("pro");
    const once = dbLosingRaces(k.id, 1);
    const renamed = await rename(once.db, k.id);
    expect(renamed.status, await renamed.clone().text()).toBe(200);
    expect(((await renamed.json()) as KeyView).name).toBe("renamed");
    expect(once.raced()).toBe(1);

    const always = dbLosingRaces(k.id, WRITE_ATTEMPTS);
    const body = await expectError(
      await rename(always.db, k.id, "renamed again"),
      503,
      "service_unavailable",
    );
    expect(body.message).toBe(
      "The key kept changing while this request tried to change it; repeat it.",
    );
    expect(always.raced()).toBe(WRITE_ATTEMPTS);
    expect(await auditActionsOf(k.id)).toEqual(["update", "create"]);
  });
});
