// The operator surfaces refuse what they cannot honour: a revoked key is final, writes that change
// nothing leave no audit entry, unknown query parameters are named, meta nesting and ownerId are
// held to rules, the usage CSV is safe in spreadsheets; and on the public side a secret retired by
// a second roll, a duplicated Idempotency-Key and integers with leading zeros.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { toCsv } from "../src/routes/admin/key-views";
import {
  ADMIN,
  auth,
  call,
  expectError,
  issueKey,
  mockClock,
  patchKey,
  postJson,
  T0,
} from "./helpers";

const time = mockClock(T0);
let seq = 0;

async function auditActions(keyId: string): Promise<string[]> {
  const res = await call(`/admin/v1/audit?keyId=${keyId}&limit=100`, { headers: ADMIN });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: Array<{ action: string }> }).data.map((e) => e.action);
}

const revoke = (id: string) => call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN });
const unban = (id: string) =>
  call(`/admin/v1/keys/${id}/unban`, { method: "POST", headers: ADMIN });
const roll = (id: string, gracePeriodSeconds = 0) =>
  postJson(`/admin/v1/keys/${id}/roll`, { gracePeriodSeconds }, ADMIN);

describe("a revoked key is final", () => {
  it.each([
    ["plan", { plan: "business" }],
    ["name", { name: "renamed" }],
    ["limits", { plan: "enterprise", limits: { perMinute: 5, perDay: 50 } }],
    ["expiresAt", { expiresAt: "2031-01-01T00:00:00Z" }],
    ["enabled: true", { enabled: true }],
    ["enabled: false", { enabled: false }],
  ])("PATCH %s → 409 key_revoked, nothing written, no audit entry", async (_label, body) => {
    const k = await issueKey("pro");
    expect((await revoke(k.id)).status).toBe(200);
    const before = await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json();
    const body409 = await expectError(await patchKey(k.id, body), 409, "key_revoked");
    expect(body409.message).toMatch(/revoked/);
    const after = await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json();
    expect(after).toEqual(before);
    expect(await auditActions(k.id)).toEqual(["revoke", "create"]);
  });

  it("roll → 409 key_revoked; revoking again → 200 with the first revocation, no audit entry", async () => {
    const k = await issueKey("pro");
    const first = (await (await revoke(k.id)).json()) as { revokedAt: string; updatedAt: string };
    time.now += 60_000;
    await expectError(await roll(k.id), 409, "key_revoked");
    const again = await revoke(k.id);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({
      status: "revoked",
      revokedAt: first.revokedAt,
      updatedAt: first.updatedAt,
    });
    expect(await auditActions(k.id)).toEqual(["revoke", "create"]);
  });
});

describe("writes that change nothing leave no audit entry", () => {
  it("a PATCH that repeats the key's settings → 200 with the key as it is", async () => {
    const k = await issueKey("pro", undefined, { name: "same", ownerId: "acct_9" });
    time.now += 60_000;
    const res = await patchKey(k.id, {
      name: "same",
      plan: "pro",
      ownerId: "acct_9",
      enabled: true,
    });
    expect(res.status).toBe(200);
    const view = (await res.json()) as { updatedAt: string; name: string };
    expect(view).toMatchObject({ name: "same", updatedAt: new Date(T0).toISOString() });
    expect(await auditActions(k.id)).toEqual(["create"]);
    // A real change is still recorded.
    expect((await patchKey(k.id, { name: "other" })).status).toBe(200);
    expect(await auditActions(k.id)).toEqual(["update", "create"]);
  });

  it("unbanning a key that is not banned → 200, no entry; a banned one → entry", async () => {
    const k = await issueKey("enterprise", { perMinute: 1, perDay: 1000 });
    expect((await unban(k.id)).status).toBe(200);
    expect(await auditActions(k.id)).toEqual(["create"]);
    // 1 admitted, then more refusals than the ban threshold (10) in the minute: banned.
    let last: Response | undefined;
    for (let i = 0; i < 12; i++) last = await call("/v1/pets", { headers: auth(k.key) });
    await expectError(last!, 429, "key_banned");
    expect((await unban(k.id)).status).toBe(200);
    expect(await auditActions(k.id)).toEqual(["unban", "create"]);
  });
});

describe("unknown query parameters on the operator API → 400 naming them", () => {
  it("on every operation of the admin document", async () => {
    const k = await issueKey("pro");
    const doc = (await (await call("/admin/v1/openapi.json")).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    // Not OPTIONS (405 for any query) nor the public document, which takes none and reads none.
    const operations = Object.entries(doc.paths)
      .filter(([path]) => path !== "/openapi.json")
      .flatMap(([path, methods]) =>
        Object.keys(methods)
          .filter((method) => method !== "options")
          .map((method) => [method.toUpperCase(), path] as const),
      );
    expect(operations.length).toBeGreaterThanOrEqual(16);
    for (const [method, path] of operations) {
      const url = `/admin/v1${path.replace("{id}", k.id)}?owner=acct_1`;
      const init: RequestInit = { method, headers: { ...ADMIN } };
      if (method === "POST" || method === "PATCH")
        init.headers = { ...ADMIN, "Content-Type": "application/json" };
      if (method === "POST" || method === "PATCH") init.body = "{}";
      const res = await call(url, init);
      if (method === "HEAD") {
        expect(res.status, `HEAD ${path}`).toBe(400);
        continue;
      }
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message, `${method} ${path}`).toContain("unknown query parameter: owner");
    }
    // The key is untouched: nothing ran.
    const view = (await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json()) as {
      status: string;
    };
    expect(view.status).toBe("active");
  });

  it("the list with ?owner= instead of ?ownerId= is not 'all keys'", async () => {
    const body = await expectError(
      await call("/admin/v1/keys?owner=acct_1&limt=5", { headers: ADMIN }),
      400,
      "invalid_request",
    );
    expect(body.message).toBe("unknown query parameters: owner, limt");
  });
});

describe("meta nesting", () => {
  const nested = (levels: number) => {
    let value: unknown = 1;
    for (let i = 1; i < levels; i++) value = { a: value };
    return { a: value };
  };

  it("8 levels are stored; 9 or 1,000 levels → 400, never 500", async () => {
    const ok = await postJson("/admin/v1/keys", { name: "m", plan: "pro", meta: nested(8) }, ADMIN);
    expect(ok.status).toBe(201);
    for (const levels of [9, 1000]) {
      const res = await postJson(
        "/admin/v1/keys",
        { name: "m", plan: "pro", meta: nested(levels) },
        ADMIN,
      );
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toMatch(/^meta: .*8 levels/);
    }
    const k = await issueKey("pro");
    const body = await expectError(
      await patchKey(k.id, { meta: nested(1000) }),
      400,
      "invalid_request",
    );
    expect(body.message).toMatch(/^meta: /);
    // Arrays nest too.
    let deep: unknown = [];
    for (let i = 0; i < 9; i++) deep = [deep];
    await expectError(await patchKey(k.id, { meta: { deep } }), 400, "invalid_request");
  });
});

describe("ownerId is held to the rules of names", () => {
  it("is trimmed", async () => {
    const k = await issueKey("pro", undefined, { ownerId: "  acct_7 " });
    const view = (await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json()) as {
      ownerId: string;
    };
    expect(view.ownerId).toBe("acct_7");
  });

  it.each([
    ["a C1 control", "acct\u0085x"],
    ["a bidi override", "acct\u202ex"],
    ["a line separator", "acct\u2028x"],
    ["only whitespace", "   "],
    ["only invisible characters", "\u200b"],
  ])("%s → 400 naming ownerId", async (_label, ownerId) => {
    const res = await postJson("/admin/v1/keys", { name: "o", plan: "pro", ownerId }, ADMIN);
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toMatch(/^ownerId: /);
    const k = await issueKey("pro");
    const patched = await expectError(await patchKey(k.id, { ownerId }), 400, "invalid_request");
    expect(patched.message).toMatch(/^ownerId: /);
  });
});

describe("the usage CSV is safe in every spreadsheet", () => {
  it("quotes every cell and defuses formulas, also after leading whitespace", async () => {
    const day = "2030-06-10";
    const k = await issueKey("pro", undefined, {
      name: "x;=1+1",
      ownerId: '\u00a0=HYPERLINK("http://evil.example","x")',
    });
    const other = await issueKey("pro", undefined, { name: "-2+3", ownerId: "@SUM(A1)" });
    const res = await call(`/admin/v1/usage?day=${day}&limit=100`, {
      headers: { ...ADMIN, Accept: "text/csv" },
    });
    expect(res.status).toBe(200);
    const lines = (await res.text()).split("\r\n");
    expect(lines[0]).toBe(
      '"key_id","name","plan","owner_id","day","admitted","rate_limited","quota_exceeded","key_banned","stranded"',
    );
    expect(lines).toContain(
      `"${k.id}","x;'=1+1","pro","'=HYPERLINK(""http://evil.example"",""x"")","${day}","0","0","0","0","0"`,
    );
    expect(lines).toContain(`"${other.id}","'-2+3","pro","'@SUM(A1)","${day}","0","0","0","0","0"`);
    // Every cell of every row is quoted, so a spreadsheet that splits on ";" splits nothing.
    for (const line of lines.filter(Boolean))
      expect(line).toMatch(/^"(?:[^"]|"")*"(?:,"(?:[^"]|"")*")*$/);
  });
});

describe("toCsv", () => {
  it.each([
    [" =1+1", `"' =1+1"`],
    ["\u00a0\u3000+1", `"'\u00a0\u3000+1"`],
    ["\t=1", `"'\t=1"`],
    ["\r@x", `"'\r@x"`],
    ["-1", `"'-1"`],
    ["a=1", `"a=1"`],
    // A spreadsheet that ignores the quotes and splits on ";" or "," sees each piece as a cell.
    ["csv;=1+1;@SUM(A1)", `"csv;'=1+1;'@SUM(A1)"`],
    ["a, +1,b", `"a,' +1,b"`],
    ["a;\u00a0-1", `"a;'\u00a0-1"`],
    ["1-2;3", `"1-2;3"`],
    ['say "hi"', `"say ""hi"""`],
    [null, `""`],
    [7, `"7"`],
  ])("%j → %s", (value, cell) => {
    expect(toCsv(["c"], [[value]])).toBe(`"c"\r\n${cell}\r\n`);
  });
});

describe("a secret retired by a second roll", () => {
  it("is answered like a revoked key: 401 saying so, not counted as a guess", async () => {
    const ip = `203.0.113.${++seq}`;
    const k = await issueKey("pro");
    const first = k.key;
    expect((await roll(k.id, 0)).status).toBe(201);
    const second = ((await (await roll(k.id, 0)).json()) as { key: string }).key;
    expect(second).not.toBe(first);
    for (let i = 0; i < 35; i++) {
      const res = await call("/v1/pets", { headers: { ...auth(first), "CF-Connecting-IP": ip } });
      const body = await expectError(res, 401, "unauthorized");
      expect(body.message).toMatch(/rolled/);
      expect(res.headers.get("WWW-Authenticate")).toContain('error="invalid_token"');
    }
    // None of the 35 counted: the client's first real guess has 29 of 30 left.
    const guess = await call("/v1/pets", {
      headers: { ...auth(`pet_test_${"Z".repeat(43)}`), "CF-Connecting-IP": ip },
    });
    await expectError(guess, 401, "unauthorized");
    expect(guess.headers.get("X-RateLimit-Remaining")).toBe("29");
    // The retired secret is recorded in D1, the current one still works.
    const retired = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM retired_key_secrets WHERE key_id = ?",
    )
      .bind(k.id)
      .first<{ n: number }>();
    expect(retired!.n).toBe(1);
    expect((await call("/v1/pets", { headers: auth(second) })).status).toBe(200);
  });
});

describe("public inputs with one meaning", () => {
  it("two Idempotency-Key headers → 400, no pet made", async () => {
    const { key } = await issueKey("pro");
    const headers = new Headers(auth(key, { "Content-Type": "application/json" }));
    headers.append("Idempotency-Key", "a");
    headers.append("Idempotency-Key", "b");
    const res = await call("/v1/pets", {
      method: "POST",
      headers,
      body: JSON.stringify({ name: "Rex", categoryId: 1 }),
    });
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toMatch(/idempotency-key: .*exactly one/i);
    // One quoted key may hold a comma; two quoted keys may not.
    const quoted = await postJson(
      "/v1/pets",
      { name: "Rex", categoryId: 1 },
      auth(key, {
        "Idempotency-Key": '"a, b"',
      }),
    );
    expect(quoted.status).toBe(201);
    await expectError(
      await postJson(
        "/v1/pets",
        { name: "Rex", categoryId: 1 },
        auth(key, {
          "Idempotency-Key": '"a", "b"',
        }),
      ),
      400,
      "invalid_request",
    );
  });

  it("integers with leading zeros are refused everywhere: /v1/pets/01 as limit=05", async () => {
    const { key } = await issueKey("pro");
    const made = await postJson("/v1/pets", { name: "Rex", categoryId: 1 }, auth(key));
    const { id } = (await made.json()) as { id: number };
    expect((await call(`/v1/pets/${id}`, { headers: auth(key) })).status).toBe(200);
    const padded = await expectError(
      await call(`/v1/pets/0${id}`, { headers: auth(key) }),
      400,
      "invalid_request",
    );
    expect(padded.message).toBe("petId: must be written without leading zeros");
    const limit = await expectError(
      await call("/v1/pets?limit=05", { headers: auth(key) }),
      400,
      "invalid_request",
    );
    expect(limit.message).toMatch(/^limit: /);
  });
});

describe("a query parameter given twice or left out is named with the rule, in the service's words", () => {
  it.each([
    ["/v1/pets?limit=1&limit=2", "limit: must be given once (got 2 values)"],
    ["/v1/pets?cursor=a&cursor=b&cursor=c", "cursor: must be given once (got 3 values)"],
    ["/v1/pets?status=sold&status=pending", "status: must be given once (got 2 values)"],
  ])("%s", async (path, message) => {
    const { key } = await issueKey("pro");
    const body = await expectError(
      await call(path, { headers: auth(key) }),
      400,
      "invalid_request",
    );
    expect(body.message).toBe(message);
  });

  it.each([
    ["/admin/v1/usage", "day: is required"],
    ["/admin/v1/usage?day=2030-06-10&day=2030-06-11", "day: must be given once (got 2 values)"],
    ["/admin/v1/keys?plan=pro&plan=free", "plan: must be given once (got 2 values)"],
  ])("%s", async (path, message) => {
    const body = await expectError(await call(path, { headers: ADMIN }), 400, "invalid_request");
    expect(body.message).toBe(message);
  });
});

describe("a body or field that must be a JSON object and is not is named in the service's words", () => {
  const send = (method: string, path: string, body: string) =>
    call(path, { method, headers: { ...ADMIN, "Content-Type": "application/json" }, body });

  it.each(["null", "[]", '"x"', "5"])("body %s", async (body) => {
    const { id } = await issueKey("free");
    for (const [method, path] of [
      ["POST", "/admin/v1/keys"],
      ["PATCH", `/admin/v1/keys/${id}`],
      ["POST", `/admin/v1/keys/${id}/roll`],
      ["POST", "/v1/pets"],
    ] as const) {
      const res =
        path === "/v1/pets"
          ? await call(path, {
              method,
              headers: {
                ...auth((await issueKey("free")).key),
                "Content-Type": "application/json",
              },
              body,
            })
          : await send(method, path, body);
      const error = await expectError(res, 400, "invalid_request");
      expect(error.message, `${method} ${path}`).toBe("body: must be a JSON object");
    }
  });

  it("limits", async () => {
    const { id } = await issueKey("free");
    for (const limits of ["null", "[1, 2]", '"x"']) {
      const created = await send(
        "POST",
        "/admin/v1/keys",
        `{"name": "n", "plan": "enterprise", "limits": ${limits}}`,
      );
      expect((await expectError(created, 400, "invalid_request")).message).toBe(
        "limits: must be a JSON object",
      );
      const patched = await send("PATCH", `/admin/v1/keys/${id}`, `{"limits": ${limits}}`);
      expect((await expectError(patched, 400, "invalid_request")).message).toBe(
        "limits: must be a JSON object",
      );
    }
  });
});

describe("enterprise limits fit the RateLimit headers", () => {
  it("a limit over 15 digits → 400 naming the bound; 15 digits → a valid RateLimit-Policy", async () => {
    const over = await postJson(
      "/admin/v1/keys",
      { name: "huge", plan: "enterprise", limits: { perMinute: 1000, perDay: 1e15 } },
      ADMIN,
    );
    const body = await expectError(over, 400, "invalid_request");
    expect(body.message).toBe(
      "limits.perDay: must be at most 999999999999999 (the RateLimit headers carry integers of at most 15 digits)",
    );

    const made = await postJson(
      "/admin/v1/keys",
      {
        name: "largest",
        plan: "enterprise",
        limits: { perMinute: 1000, perDay: 999_999_999_999_999 },
      },
      ADMIN,
    );
    expect(made.status).toBe(201);
    const { key } = (await made.json()) as { key: string };
    const res = await call("/v1/pets", { headers: auth(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get("RateLimit-Policy")).toBe(
      '"minute";q=1000;w=60, "day";q=999999999999999;w=86400',
    );
  });
});

describe("admin cursors are only those the API issued", () => {
  const cursorOf = (values: unknown) =>
    btoa(JSON.stringify(values)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  it.each([
    ["a fraction", [1.5]],
    ["a negative id", [-1]],
    ["an unsafe integer", [2 ** 53]],
    ["an extra value", [1, 2]],
    ["an exponent", "[1e3]"],
  ])("the audit trail with %s → 400", async (_, values) => {
    const cursor =
      typeof values === "string"
        ? btoa(values).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "")
        : cursorOf(values);
    const res = await call(`/admin/v1/audit?cursor=${cursor}`, { headers: ADMIN });
    const error = await expectError(res, 400, "invalid_request");
    expect(error.message).toBe(
      "cursor: is not a cursor returned by this API (malformed or altered); restart from the first page.",
    );
  });

  it("the key list with a fractional or negative createdAt → 400; an issued cursor → 200", async () => {
    for (const values of [
      [1.5, "key_x"],
      [-1, "key_x"],
      [1, ""],
    ]) {
      const res = await call(`/admin/v1/keys?cursor=${cursorOf(values)}`, { headers: ADMIN });
      await expectError(res, 400, "invalid_request");
    }
    await issueKey();
    await issueKey();
    const first = await call("/admin/v1/keys?limit=1", { headers: ADMIN });
    const { nextCursor } = (await first.json()) as { nextCursor: string };
    const next = await call(`/admin/v1/keys?limit=1&cursor=${nextCursor}`, { headers: ADMIN });
    expect(next.status).toBe(200);
  });
});

describe("concurrent admin writes", () => {
  it("6 PATCHes of different fields at once → all 200, every change kept, each audited", async () => {
    const k = await issueKey("pro");
    const changes = [
      { name: "renamed" },
      { ownerId: "acct_6" },
      { meta: { tier: "gold" } },
      { expiresAt: "2031-01-01T00:00:00.000Z" },
      { plan: "business" },
      { enabled: false },
    ];
    const answers = await Promise.all(changes.map((change) => patchKey(k.id, change)));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const detail = (await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json()) as {
      name: string;
      ownerId: string;
      meta: unknown;
      expiresAt: string;
      plan: string;
      disabledAt: string | null;
    };
    expect(detail).toMatchObject({
      name: "renamed",
      ownerId: "acct_6",
      meta: { tier: "gold" },
      expiresAt: "2031-01-01T00:00:00.000Z",
      plan: "business",
    });
    expect(detail.disabledAt).not.toBeNull();
    const actions = await auditActions(k.id);
    expect(actions.filter((a) => a === "update" || a === "disable")).toHaveLength(6);
  });
});
