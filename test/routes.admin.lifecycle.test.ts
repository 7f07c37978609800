// Key lifecycle through the admin API: roll, disable/enable, expiry, owner and metadata, list filters.
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import {
  ADMIN,
  auth,
  call,
  callWith,
  expectError,
  issueKey,
  keyDetail,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);

type KeyView = {
  id: string;
  name: string;
  plan: string;
  prefix: string;
  status: string;
  disabledAt: string | null;
  expiresAt: string | null;
  ownerId: string | null;
  meta: Record<string, unknown> | null;
  rolledAt: string | null;
  previousSecretExpiresAt: string | null;
  key?: string;
};

const list = (key: string) => call("/v1/pets?limit=1", { headers: auth(key) });
const roll = (id: string, body: unknown = {}) => postJson(`/admin/v1/keys/${id}/roll`, body, ADMIN);

describe("POST /admin/v1/keys/{id}/roll", () => {
  it("gives a new secret for the same key; the old one works through the grace period, then gets 401 saying it was rolled", async () => {
    const k = await issueKey("enterprise", { perMinute: 100, perDay: 1_000 });
    expect((await list(k.key)).status).toBe(200); // warm in this isolate's cache
    const res = await roll(k.id, { gracePeriodSeconds: 600 });
    expect(res.status).toBe(201);
    const rolled = (await res.json()) as KeyView;
    expect(rolled).toMatchObject({ id: k.id, plan: "enterprise", status: "active" });
    expect(rolled.key).toMatch(/^pet_test_[0-9A-Za-z]{43}_[0-9A-Za-z]{20}_[0-9a-f]{32}$/);
    expect(rolled.key).not.toBe(k.key);
    expect(rolled.prefix).toBe(rolled.key!.slice(0, 13));
    expect(rolled.rolledAt).toBe(new Date(T0).toISOString());
    expect(rolled.previousSecretExpiresAt).toBe(new Date(T0 + 600_000).toISOString());

    // Both secrets work during the grace period, and count in the same object.
    const viaOld = await list(k.key);
    const viaNew = await list(rolled.key!);
    expect([viaOld.status, viaNew.status]).toEqual([200, 200]);
    expect(viaOld.headers.get("X-RateLimit-Remaining")).toBe("98");
    expect(viaNew.headers.get("X-RateLimit-Remaining")).toBe("97");

    time.now += 600_000;
    const refused = await expectError(await list(k.key), 401, "unauthorized");
    expect(refused.message).toMatch(/rolled/);
    expect((await list(rolled.key!)).status).toBe(200);
    // The secret is never shown again.
    expect(JSON.stringify(await (await keyDetail(k.id)).json())).not.toContain(rolled.key!);
  });

  it("defaults to a one-day grace period; 0 ends the old secret at once", async () => {
    const k = await issueKey("pro");
    const byDefault = (await (await roll(k.id)).json()) as KeyView;
    expect(byDefault.previousSecretExpiresAt).toBe(new Date(T0 + DAY_MS).toISOString());
    expect((await list(k.key)).status).toBe(200);
    const again = (await (await roll(k.id, { gracePeriodSeconds: 0 })).json()) as KeyView;
    expect((await list(again.key!)).status).toBe(200);
    // The secret before it is now the previous one, and its grace period is over.
    const message = (await expectError(await list(byDefault.key!), 401, "unauthorized")).message;
    expect(message).toMatch(/rolled/);
    // The first secret is two rolls old: recognised only to say so (not taken for a guess).
    expect((await expectError(await list(k.key), 401, "unauthorized")).message).toMatch(
      /rolled more than once/,
    );
  });

  it.each([
    ["a negative grace period", { gracePeriodSeconds: -1 }],
    ["more than 7 days", { gracePeriodSeconds: 604_801 }],
    ["a fraction", { gracePeriodSeconds: 1.5 }],
    ["a string", { gracePeriodSeconds: "60" }],
    ["an unknown field", { grace: 60 }],
  ])("%s → 400", async (_label, body) => {
    const k = await issueKey("pro");
    await expectError(await roll(k.id, body), 400, "invalid_request");
    expect((await list(k.key)).status).toBe(200);
  });

  it("the new secret reaches the operator even when the key's quota object cannot be told (201)", async () => {
    const k = await issueKey("pro");
    const broken = { getByName: () => ({ configure: () => Promise.reject(new Error("down")) }) };
    const res = await callWith({ QUOTA: broken }, `/admin/v1/keys/${k.id}/roll`, {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ gracePeriodSeconds: 60 }),
    });
    expect(res.status).toBe(201);
    const { key } = (await res.json()) as KeyView;
    expect((await list(key!)).status).toBe(200);
    expect((await list(k.key)).status).toBe(200); // within its grace period
  });

  it("a revoked key cannot be rolled (409 key_revoked); an unknown one is 404", async () => {
    const k = await issueKey("pro");
    await call(`/admin/v1/keys/${k.id}`, { method: "DELETE", headers: ADMIN });
    await expectError(await roll(k.id), 409, "key_revoked");
    await expectError(await roll("key_AAAAAAAAAAAAAAAAAAAA"), 404, "not_found");
  });
});

describe("PATCH enabled", () => {
  it("false refuses the key from its next request with 401 saying it is disabled; true lets it in again", async () => {
    const k = await issueKey("pro");
    expect((await list(k.key)).status).toBe(200); // cached in this isolate
    const off = await patchKey(k.id, { enabled: false });
    expect(off.status).toBe(200);
    expect(await off.json()).toMatchObject({
      status: "disabled",
      disabledAt: new Date(T0).toISOString(),
    });
    const refused = await expectError(await list(k.key), 401, "unauthorized");
    expect(refused.message).toMatch(/disabled/);

    const on = await patchKey(k.id, { enabled: true });
    expect(await on.json()).toMatchObject({ status: "active", disabledAt: null });
    expect((await list(k.key)).status).toBe(200);
  });

  it("revoke stays final: a revoked key cannot be enabled", async () => {
    const k = await issueKey("pro");
    await patchKey(k.id, { enabled: false });
    await call(`/admin/v1/keys/${k.id}`, { method: "DELETE", headers: ADMIN });
    await expectError(await patchKey(k.id, { enabled: true }), 409, "key_revoked");
    expect(((await (await keyDetail(k.id)).json()) as KeyView).status).toBe("revoked");
    await expectError(await list(k.key), 401, "unauthorized");
  });

  it("refuses a value that is not a boolean", async () => {
    const k = await issueKey("pro");
    await expectError(await patchKey(k.id, { enabled: "no" }), 400, "invalid_request");
  });
});

describe("PATCH expiresAt", () => {
  it("sets an expiry (the key stops at it) and clears it with null", async () => {
    const k = await issueKey("pro");
    const at = new Date(T0 + 10 * MINUTE_MS).toISOString();
    expect(await (await patchKey(k.id, { expiresAt: at })).json()).toMatchObject({
      expiresAt: at,
      status: "active",
    });
    time.now += 10 * MINUTE_MS;
    expect((await expectError(await list(k.key), 401, "unauthorized")).message).toMatch(/expired/);
    expect(((await (await keyDetail(k.id)).json()) as KeyView).status).toBe("expired");
    expect(await (await patchKey(k.id, { expiresAt: null })).json()).toMatchObject({
      expiresAt: null,
      status: "active",
    });
    expect((await list(k.key)).status).toBe(200);
  });

  it("refuses a past or malformed expiry", async () => {
    const k = await issueKey("pro");
    await expectError(
      await patchKey(k.id, { expiresAt: new Date(T0 - 1).toISOString() }),
      400,
      "invalid_request",
    );
    await expectError(await patchKey(k.id, { expiresAt: "tomorrow" }), 400, "invalid_request");
  });
});

describe("ownerId and meta", () => {
  it("are set on create, changed and cleared with PATCH, and shown in every key view", async () => {
    const k = await issueKey("pro", undefined, {
      ownerId: "acct_42",
      meta: { crm: "X-1", seats: 3 },
    });
    expect(k).toMatchObject({ ownerId: "acct_42", meta: { crm: "X-1", seats: 3 } });
    expect(await (await keyDetail(k.id)).json()).toMatchObject({
      ownerId: "acct_42",
      meta: { crm: "X-1", seats: 3 },
    });
    const changed = await patchKey(k.id, { ownerId: "acct_43", meta: { nested: { a: [1, 2] } } });
    expect(await changed.json()).toMatchObject({
      ownerId: "acct_43",
      meta: { nested: { a: [1, 2] } },
    });
    const listed = (await (
      await call("/admin/v1/keys?ownerId=acct_43", { headers: ADMIN })
    ).json()) as { data: KeyView[] };
    expect(listed.data.map((x) => x.id)).toEqual([k.id]);
    expect(listed.data[0]!.meta).toEqual({ nested: { a: [1, 2] } });
    expect(await (await patchKey(k.id, { ownerId: null, meta: null })).json()).toMatchObject({
      ownerId: null,
      meta: null,
    });
  });

  it.each([
    ["an owner over 200 characters", { ownerId: "x".repeat(201) }],
    ["an empty owner", { ownerId: "" }],
    ["meta that is an array", { meta: [1, 2] }],
    ["meta that is a string", { meta: "{}" }],
    ["meta over 2 KiB", { meta: { blob: "x".repeat(2048) } }],
  ])("%s → 400", async (_label, extra) => {
    const res = await postJson("/admin/v1/keys", { name: "m", plan: "pro", ...extra }, ADMIN);
    await expectError(res, 400, "invalid_request");
    const k = await issueKey("pro");
    await expectError(await patchKey(k.id, extra), 400, "invalid_request");
  });

  it("meta of exactly 2 KiB is accepted", async () => {
    const blob = "x".repeat(2048 - JSON.stringify({ blob: "" }).length);
    const k = await issueKey("pro", undefined, { meta: { blob } });
    expect((k as unknown as KeyView).meta).toEqual({ blob });
  });
});

describe("GET /admin/v1/keys filters", () => {
  async function ids(query: string): Promise<string[]> {
    const res = await call(`/admin/v1/keys?limit=100&${query}`, { headers: ADMIN });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { data: KeyView[] }).data.map((k) => k.id);
  }

  it("plan, state, ownerId and q (a name prefix) narrow the list, together too", async () => {
    const owner = `owner-${crypto.randomUUID()}`;
    const make = (plan: "free" | "pro", name: string) => {
      time.now += 1; // creation order is the list order
      return issueKey(plan, undefined, { ownerId: owner, name });
    };
    const active = await make("pro", "Acme production");
    const disabled = await make("pro", "Acme staging");
    const revoked = await make("free", "Beta");
    const expired = await make("free", "Acme old");
    await patchKey(disabled.id, { enabled: false });
    await call(`/admin/v1/keys/${revoked.id}`, { method: "DELETE", headers: ADMIN });
    await patchKey(expired.id, { expiresAt: new Date(T0 + MINUTE_MS).toISOString() });
    time.now += MINUTE_MS;

    expect(await ids(`ownerId=${owner}`)).toEqual([active.id, disabled.id, revoked.id, expired.id]);
    expect(await ids(`ownerId=${owner}&state=active`)).toEqual([active.id]);
    expect(await ids(`ownerId=${owner}&state=disabled`)).toEqual([disabled.id]);
    expect(await ids(`ownerId=${owner}&state=revoked`)).toEqual([revoked.id]);
    expect(await ids(`ownerId=${owner}&state=expired`)).toEqual([expired.id]);
    expect(await ids(`ownerId=${owner}&plan=free`)).toEqual([revoked.id, expired.id]);
    expect(await ids(`ownerId=${owner}&q=Acme`)).toEqual([active.id, disabled.id, expired.id]);
    expect(await ids(`ownerId=${owner}&q=${encodeURIComponent("Acme s")}`)).toEqual([disabled.id]);
    expect(await ids(`ownerId=${owner}&q=acme`)).toEqual([]); // case-sensitive
    expect(await ids(`ownerId=${owner}&q=Acme&plan=pro&state=active`)).toEqual([active.id]);
    expect(await ids(`ownerId=${owner}-nobody`)).toEqual([]);
    // A % or _ in q is a plain character, not a wildcard.
    expect(await ids(`ownerId=${owner}&q=%25`)).toEqual([]);
  });

  it("filters keep paging: every page is filtered and nextCursor walks on", async () => {
    const owner = `owner-${crypto.randomUUID()}`;
    const made = [];
    for (let i = 0; i < 5; i++) {
      time.now += 1; // creation order is the list order
      made.push(await issueKey("pro", undefined, { ownerId: owner }));
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await call(
        `/admin/v1/keys?ownerId=${owner}&limit=2${cursor ? `&cursor=${cursor}` : ""}`,
        { headers: ADMIN },
      );
      const page = (await res.json()) as { data: KeyView[]; nextCursor: string | null };
      seen.push(...page.data.map((k) => k.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(made.map((k) => k.id));
  });

  it.each([
    ["an unknown plan", "plan=gold"],
    ["an unknown state", "state=paused"],
    ["a state in another case", "state=Active"],
    ["an empty q", "q="],
  ])("%s → 400", async (_label, query) => {
    await expectError(
      await call(`/admin/v1/keys?${query}`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
  });
});
