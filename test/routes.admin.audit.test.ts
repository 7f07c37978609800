// The audit trail: every admin write appended in the same request, with its actor (the admin
// token's name), action, before → after and request id; named admin tokens.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  ADMIN,
  auth,
  brokenDb,
  call,
  callWith,
  expect503,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

mockClock(T0);

const ALICE = { Authorization: "Bearer test-alice-admin-token" };
const CI = { Authorization: "Bearer test-ci-admin-token-0" };

type Entry = {
  id: number;
  at: string;
  actor: string;
  action: string;
  keyId: string;
  changes: Record<string, { before: unknown; after: unknown }>;
  requestId: string;
  clientRequestId: string | null;
};

async function auditOf(keyId: string, query = ""): Promise<Entry[]> {
  const res = await call(`/admin/v1/audit?keyId=${keyId}&limit=100${query}`, { headers: ADMIN });
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { data: Entry[] }).data;
}

describe("audit trail", () => {
  it("records every admin write, newest first, with actor, action, before → after and the request id", async () => {
    const created = await postJson(
      "/admin/v1/keys",
      { name: "audited", plan: "pro", ownerId: "acct_1" },
      { ...ALICE, "X-Request-Id": "req-create-1" },
    );
    expect(created.status).toBe(201);
    const k = (await created.json()) as { id: string; key: string };
    const patch = (body: unknown, headers: Record<string, string>) =>
      call(`/admin/v1/keys/${k.id}`, {
        method: "PATCH",
        headers: { ...headers, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await patch({ plan: "business", name: "renamed" }, CI)).status).toBe(200);
    expect((await patch({ enabled: false }, ADMIN)).status).toBe(200);
    expect((await patch({ enabled: true }, ALICE)).status).toBe(200);
    const rolled = await postJson(`/admin/v1/keys/${k.id}/roll`, { gracePeriodSeconds: 60 }, CI);
    const newSecret = ((await rolled.json()) as { key: string }).key;
    const revoke = await call(`/admin/v1/keys/${k.id}`, { method: "DELETE", headers: ADMIN });
    expect(revoke.status).toBe(200);

    const entries = await auditOf(k.id);
    expect(entries.map((e) => [e.action, e.actor])).toEqual([
      ["revoke", "admin"],
      ["roll", "ci"],
      ["enable", "alice"],
      ["disable", "admin"],
      ["update", "ci"],
      ["create", "alice"],
    ]);
    expect(entries.map((e) => e.id)).toEqual([...entries.map((e) => e.id)].sort((a, b) => b - a));
    const [revoked, roll, enable, disable, update, create] = entries;
    // The service's own request id, with the client's X-Request-Id beside it, marked as such.
    expect(create!.clientRequestId).toBe("req-create-1");
    expect(create!.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(revoked!.requestId).toBe(revoke.headers.get("X-Request-Id"));
    expect(revoked!.clientRequestId).toBeNull();
    expect(create!.at).toBe(new Date(T0).toISOString());
    expect(create!.changes).toMatchObject({
      name: { before: null, after: "audited" },
      plan: { before: null, after: "pro" },
      ownerId: { before: null, after: "acct_1" },
      enabled: { before: null, after: true },
    });
    expect(update!.changes).toEqual({
      name: { before: "audited", after: "renamed" },
      plan: { before: "pro", after: "business" },
      limits: {
        before: { perMinute: 300, perDay: 10_000 },
        after: { perMinute: 1_000, perDay: 100_000 },
      },
    });
    expect(disable!.changes).toEqual({ enabled: { before: true, after: false } });
    expect(enable!.changes).toEqual({ enabled: { before: false, after: true } });
    expect(Object.keys(roll!.changes).sort()).toEqual(["prefix", "previousSecretExpiresAt"]);
    expect(revoked!.changes).toEqual({
      revokedAt: { before: null, after: new Date(T0).toISOString() },
    });

    // Never a secret or a hash.
    const text = JSON.stringify(entries);
    for (const secret of [k.key, newSecret]) {
      expect(text).not.toContain(secret);
      const hash = await env.DB.prepare(
        "SELECT key_hash, previous_key_hash FROM api_keys WHERE id = ?",
      )
        .bind(k.id)
        .first<{ key_hash: string; previous_key_hash: string }>();
      expect(text).not.toContain(hash!.key_hash);
      expect(text).not.toContain(hash!.previous_key_hash);
    }
  });

  it("refused writes leave no entry", async () => {
    const k = await issueKey("pro");
    await expectError(await patchKey(k.id, { plan: "gold" }), 400, "invalid_request");
    await expectError(await patchKey(k.id, { expiresAt: "2000-01-01" }), 400, "invalid_request");
    await expectError(
      await postJson(`/admin/v1/keys/${k.id}/roll`, { gracePeriodSeconds: -5 }, ADMIN),
      400,
      "invalid_request",
    );
    expect((await auditOf(k.id)).map((e) => e.action)).toEqual(["create"]);
  });

  it("a change and its entry are written together: when the entry cannot be written, neither is (503)", async () => {
    const k = await issueKey("pro");
    const db = brokenDb({ fails: (sql) => sql.includes("INSERT INTO audit_log") });
    const res = await callWith({ DB: db }, `/admin/v1/keys/${k.id}`, {
      method: "PATCH",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "never" }),
    });
    await expect503(res);
    const detail = (await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json()) as {
      name: string;
    };
    expect(detail.name).toBe("test-pro");
    const created = await callWith({ DB: db }, "/admin/v1/keys", {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "ghost-key", plan: "pro" }),
    });
    await expect503(created);
    const ghost = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM api_keys WHERE name = 'ghost-key'",
    ).first<{
      n: number;
    }>();
    expect(ghost!.n).toBe(0);
    expect((await auditOf(k.id)).map((e) => e.action)).toEqual(["create"]);
  });

  it("pages newest first with limit and nextCursor; without keyId it covers every key", async () => {
    const k = await issueKey("pro");
    for (let i = 0; i < 4; i++) await patchKey(k.id, { name: `name-${i}` });
    const all = await auditOf(k.id);
    expect(all).toHaveLength(5);
    const seen: Entry[] = [];
    let cursor: string | null = null;
    do {
      const res = await call(
        `/admin/v1/audit?keyId=${k.id}&limit=2${cursor ? `&cursor=${cursor}` : ""}`,
        { headers: ADMIN },
      );
      const page = (await res.json()) as { data: Entry[]; nextCursor: string | null };
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(all);
    const newest = (await (await call("/admin/v1/audit?limit=1", { headers: ADMIN })).json()) as {
      data: Entry[];
    };
    expect(newest.data[0]).toEqual(all[0]);
  });

  it.each([
    ["a malformed keyId", "keyId=nope"],
    ["a bad cursor", "cursor=xyz"],
    ["a cursor of another list", `cursor=${btoa('["key_x"]').replace(/=+$/, "")}`],
    ["a bad limit", "limit=101"],
  ])("%s → 400", async (_label, query) => {
    await expectError(
      await call(`/admin/v1/audit?${query}`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
  });

  it("needs an admin token", async () => {
    await expectError(await call("/admin/v1/audit"), 401, "unauthorized");
    const { key } = await issueKey("pro");
    await expectError(await call("/admin/v1/audit", { headers: auth(key) }), 401, "unauthorized");
  });
});

describe("named admin tokens (ADMIN_TOKENS)", () => {
  it("each named token and ADMIN_TOKEN are valid at once; a rotated-out token is not", async () => {
    for (const headers of [ADMIN, ALICE, CI])
      expect((await call("/admin/v1/keys?limit=1", { headers })).status).toBe(200);
    // Rotation: alice gets a new token and the old one is removed.
    const rotated = { ADMIN_TOKENS: "alice:alice-second-token-0000,ci:test-ci-admin-token-0" };
    const old = await callWith(rotated, "/admin/v1/keys?limit=1", { headers: ALICE });
    await expectError(old, 401, "unauthorized");
    const fresh = await callWith(rotated, "/admin/v1/keys?limit=1", {
      headers: { Authorization: "Bearer alice-second-token-0000" },
    });
    expect(fresh.status).toBe(200);
  });

  it.each([
    ["an entry without a token", "alice"],
    ["a short token", "alice:short"],
    ["a bad name", "al ice:long-enough-token-000"],
    ["a name used twice", "bob:long-enough-token-001,bob:long-enough-token-002"],
    ["the name of ADMIN_TOKEN", "admin:long-enough-token-003"],
    ["one token under two names", "bob:long-enough-token-004,eve:long-enough-token-004"],
  ])(
    "%s → every admin request answers 500 and says nothing of the setting",
    async (_label, value) => {
      const res = await callWith({ ADMIN_TOKENS: value }, "/admin/v1/keys", { headers: ADMIN });
      const body = await expectError(res, 500, "internal_error");
      expect(body.message).not.toContain("token");
    },
  );

  it("ADMIN_TOKENS alone is enough (no ADMIN_TOKEN); with neither, 500", async () => {
    const onlyNamed = await callWith({ ADMIN_TOKEN: "" }, "/admin/v1/keys?limit=1", {
      headers: CI,
    });
    expect(onlyNamed.status).toBe(200);
    await expectError(
      await callWith({ ADMIN_TOKEN: "", ADMIN_TOKENS: "" }, "/admin/v1/keys", { headers: CI }),
      500,
      "internal_error",
    );
  });
});
