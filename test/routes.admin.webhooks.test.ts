// Webhook endpoints through the operator API: registered for an owner or for everyone, with a
// signing secret shown once and rollable with a grace period; every bad input a clear 400; every
// change audited; secrets never shown again.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getEndpoint, openSigningSecrets } from "../src/db/webhooks";
import { configOrThrow, webhookSecretBoxOrThrow } from "../src/lib/config";
import { WEBHOOK_EVENT_TYPES, WEBHOOK_TEST_EVENT } from "../src/schemas/webhooks";
import { ADMIN, call, callWith, expectError, mockClock, postJson, T0 } from "./helpers";

const time = mockClock(T0);
const VIEWER = { Authorization: `Bearer ${env.ADMIN_READ_TOKENS.split(":")[1]}` };

const URL_OK = "https://hooks.example.com/animal-store";

interface Endpoint {
  id: string;
  url: string;
  eventTypes: string[];
  ownerId: string | null;
  description: string | null;
  enabled: boolean;
  disabledReason: string | null;
  previousSecretExpiresAt: string | null;
  secret?: string;
}

async function create(body: Record<string, unknown>): Promise<Endpoint> {
  const res = await postJson("/admin/v1/webhooks", body, ADMIN);
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as Endpoint;
}

const patch = (id: string, body: unknown) =>
  call(`/admin/v1/webhooks/${id}`, {
    method: "PATCH",
    headers: { ...ADMIN, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

async function auditOf(id: string): Promise<Array<{ action: string; changes: object }>> {
  const res = await call("/admin/v1/audit?limit=100", { headers: ADMIN });
  const { data } = (await res.json()) as {
    data: Array<{ action: string; keyId: string; changes: object }>;
  };
  return data.filter((e) => e.keyId === id);
}

describe("registering an endpoint", () => {
  it("returns it with a whsec_ secret once, Location, and audits it; reads never show the secret", async () => {
    const res = await postJson(
      "/admin/v1/webhooks",
      { url: URL_OK, eventTypes: ["quota.day.warning", "key.banned"], ownerId: "acct_42" },
      ADMIN,
    );
    expect(res.status).toBe(201);
    const created = (await res.json()) as Endpoint;
    expect(created.id).toMatch(/^whe_[0-9A-Za-z]{20}$/);
    expect(res.headers.get("Location")).toBe(`/admin/v1/webhooks/${created.id}`);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created).toMatchObject({
      url: URL_OK,
      eventTypes: ["quota.day.warning", "key.banned"],
      ownerId: "acct_42",
      enabled: true,
    });
    const read = await call(`/admin/v1/webhooks/${created.id}`, { headers: ADMIN });
    expect(read.status).toBe(200);
    const text = await read.text();
    expect(text).not.toContain(created.secret!.slice(6));
    expect(JSON.parse(text)).not.toHaveProperty("secret");
    const listed = await (
      await call("/admin/v1/webhooks?ownerId=acct_42", { headers: ADMIN })
    ).text();
    expect(listed).toContain(created.id);
    expect(listed).not.toContain(created.secret!.slice(6));
    const audit = await auditOf(created.id);
    expect(audit.map((e) => e.action)).toEqual(["webhook_create"]);
    expect(JSON.stringify(audit)).not.toContain(created.secret!.slice(6));
  });

  it("without an owner it is for every owner; with the operator's own secret it keeps it", async () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const e = await create({ url: URL_OK, eventTypes: ["key.revoked"], secret });
    expect(e.ownerId).toBeNull();
    expect(e.secret).toBe(secret);
  });

  it.each([
    ["http", { url: "http://hooks.example.com/x" }, /^url: must use https:\.$/],
    ["a private host", { url: "https://10.0.0.7/x" }, /^url: must name a public host/],
    ["link-local metadata", { url: "https://169.254.169.254/" }, /^url: must name a public host/],
    ["localhost", { url: "https://localhost:8443/x" }, /^url: must name a public host/],
    ["a .internal name", { url: "https://svc.internal/x" }, /^url: .*\.internal/],
    [
      "credentials",
      { url: "https://a:b@hooks.example.com/" },
      /^url: must not contain credentials/,
    ],
    ["not a URL", { url: "hooks" }, /^url: must be an absolute URL/],
    [
      "an empty fragment",
      { url: "https://hooks.example.com/x#" },
      /^url: must not have a fragment/,
    ],
    [
      "localhost with two trailing dots",
      { url: "https://localhost../x" },
      /^url: must name a public host \(localhost\.\. is a single-label name/,
    ],
    ["a .local name with two trailing dots", { url: "https://nas.local../x" }, /\.local names/],
    [
      "a documentation IPv6 address (3fff::/20)",
      { url: "https://[3fff::1]/x" },
      /^url: must name a public host \(\[3fff::1\] is in 3fff::\/20: /,
    ],
    ["ORCHID", { url: "https://[2001:10::1]/" }, /^url: .*\[2001:10::1\] is in 2001:10::\/28/],
    ["ORCHIDv2", { url: "https://[2001:20::1]/" }, /^url: .*2001:20::\/28/],
    ["IPv6 benchmarking", { url: "https://[2001:2::1]/" }, /^url: .*2001:2::\/48/],
    ["a .alt name", { url: "https://x.alt/" }, /^url: .*\.alt names/],
    ["a reverse-DNS name", { url: "https://1.0.0.127.in-addr.arpa/" }, /^url: .*\.arpa names/],
    ["invalid Punycode", { url: "https://xn--a.com/" }, /^url: .*not valid Punycode/],
    ["a URL too long", { url: `https://hooks.example.com/${"a".repeat(2100)}` }, /^url: .*2048/],
    [
      "an unknown event type",
      { eventTypes: ["quota.minute.warning"] },
      /^eventTypes\.0: must be one of: quota\.day\.warning/,
    ],
    ["no event type", { eventTypes: [] }, /^eventTypes: must name at least one/],
    [
      "a type twice",
      { eventTypes: ["key.banned", "key.banned"] },
      /^eventTypes: must not name a type twice/,
    ],
    ["event types not an array", { eventTypes: "key.banned" }, /^eventTypes: must be an array/],
    ["an oversized secret", { secret: `whsec_${"A".repeat(300)}` }, /^secret: must be at most 200/],
    [
      "a secret of 100 bytes",
      { secret: `whsec_${btoa("z".repeat(100)).slice(0, 136)}` },
      /^secret: /,
    ],
    [
      "a secret without whsec_",
      { secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" },
      /^secret: must start with whsec_/,
    ],
    [
      "a short secret",
      { secret: `whsec_${btoa("z".repeat(16))}` },
      /^secret: must hold 24 to 64 bytes/,
    ],
    ["an unknown field", { colour: "red" }, /unknown field: colour/],
    ["an empty owner", { ownerId: "  " }, /^ownerId: must not be empty/],
    [
      "a description with a lone surrogate (stored as U+FFFD, unlike the answer)",
      { description: "a\ud800b" },
      /^description: must be well-formed Unicode/,
    ],
    // The rules of names: a description is one line of text in the console and the CLI's table.
    [
      "a description with NUL",
      { description: "a\u0000b" },
      /^description: must not contain control/,
    ],
    [
      "a description with a line break",
      { description: "a\nb" },
      /^description: must not contain control/,
    ],
    [
      "a description with a C1 control",
      { description: "a\u009bb" },
      /^description: must not contain control/,
    ],
    [
      "a description with DEL",
      { description: "a\u007fb" },
      /^description: must not contain control/,
    ],
    [
      "a description with a bidi override",
      { description: "invoice \u202egpj.exe" },
      /^description: must not contain bidirectional overrides or isolates/,
    ],
    [
      "a description with a bidi isolate",
      { description: "a\u2066b" },
      /^description: must not contain bidirectional overrides or isolates/,
    ],
    [
      "a description with a line separator",
      { description: "a\u2028b" },
      /^description: must not contain line or paragraph separators/,
    ],
  ])("%s → 400 naming the field and rule, nothing stored", async (_label, change, message) => {
    const before = await (await call("/admin/v1/webhooks?limit=100", { headers: ADMIN })).json();
    const body = { url: URL_OK, eventTypes: ["key.banned"], ...change };
    const error = await expectError(
      await postJson("/admin/v1/webhooks", body, ADMIN),
      400,
      "invalid_request",
    );
    expect(error.message).toMatch(message);
    const after = await (await call("/admin/v1/webhooks?limit=100", { headers: ADMIN })).json();
    expect(after).toEqual(before);
  });

  it("http://localhost only where WEBHOOK_LOCAL_RECEIVERS is on (local only)", async () => {
    const body = JSON.stringify({ url: "http://localhost:8788/", eventTypes: ["key.banned"] });
    const init = {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body,
    };
    const off = await callWith({ WEBHOOK_LOCAL_RECEIVERS: "off" }, "/admin/v1/webhooks", init);
    expect((await expectError(off, 400, "invalid_request")).message).toMatch(
      /^url: must use https/,
    );
    const on = await callWith({ WEBHOOK_LOCAL_RECEIVERS: "on" }, "/admin/v1/webhooks", init);
    expect(on.status).toBe(201);
    const deployed = await callWith(
      { WEBHOOK_LOCAL_RECEIVERS: "on", ENVIRONMENT: "production" },
      "/admin/v1/webhooks",
      init,
    );
    expect(deployed.status).toBe(500);
  });

  it("a read-only token cannot register one (403)", async () => {
    const res = await postJson(
      "/admin/v1/webhooks",
      { url: URL_OK, eventTypes: ["key.banned"] },
      VIEWER,
    );
    await expectError(res, 403, "forbidden");
  });
});

describe("changing, disabling and deleting", () => {
  it("PATCH changes the fields given and audits what changed; one that changes nothing writes no entry", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    const res = await patch(e.id, { eventTypes: ["key.banned", "key.unbanned"], enabled: false });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      eventTypes: ["key.banned", "key.unbanned"],
      enabled: false,
      disabledReason: "disabled by an operator",
      url: URL_OK,
    });
    expect((await patch(e.id, { enabled: false })).status).toBe(200);
    const enabled = (await (await patch(e.id, { enabled: true })).json()) as Endpoint;
    expect(enabled).toMatchObject({ enabled: true, disabledReason: null });
    const audit = await auditOf(e.id);
    expect(audit.map((x) => x.action)).toEqual([
      "webhook_update",
      "webhook_update",
      "webhook_create",
    ]);
    expect(audit[1]?.changes).toMatchObject({
      eventTypes: { before: ["key.banned"], after: ["key.banned", "key.unbanned"] },
    });
  });

  it("PATCH refuses a bad URL, an empty body and unknown types with 400, changing nothing", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    await expectError(await patch(e.id, { url: "https://192.168.0.1/" }), 400, "invalid_request");
    await expectError(await patch(e.id, {}), 400, "invalid_request");
    await expectError(await patch(e.id, { eventTypes: ["nope"] }), 400, "invalid_request");
    const bidi = await expectError(
      await patch(e.id, { description: "a\u202eb" }),
      400,
      "invalid_request",
    );
    expect(bidi.message).toMatch(/^description: must not contain bidirectional overrides/);
    const read = (await (
      await call(`/admin/v1/webhooks/${e.id}`, { headers: ADMIN })
    ).json()) as Endpoint;
    expect(read.url).toBe(URL_OK);
    expect((await auditOf(e.id)).length).toBe(1);
  });

  it("a description keeps what a name keeps: right-to-left text, emoji, marks, an empty one", async () => {
    for (const description of [
      "مرحبا بالعالم",
      "on call 👨‍👩‍👧",
      "\u200fשלום\u200e ok",
      "tab-free, one line",
      "",
    ]) {
      const e = await create({ url: URL_OK, eventTypes: ["key.banned"], description });
      expect(e.description, JSON.stringify(description)).toBe(description);
    }
  });

  it("DELETE removes it (204, audited), then 404; a malformed id is 400", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    const del = await call(`/admin/v1/webhooks/${e.id}`, { method: "DELETE", headers: ADMIN });
    expect(del.status).toBe(204);
    await expectError(
      await call(`/admin/v1/webhooks/${e.id}`, { headers: ADMIN }),
      404,
      "not_found",
    );
    await expectError(
      await call(`/admin/v1/webhooks/${e.id}`, { method: "DELETE", headers: ADMIN }),
      404,
      "not_found",
    );
    expect((await auditOf(e.id)).map((x) => x.action)).toEqual([
      "webhook_delete",
      "webhook_create",
    ]);
    const bad = await call("/admin/v1/webhooks/key_x", { headers: ADMIN });
    expect((await expectError(bad, 400, "invalid_request")).message).toMatch(
      /^id: must be a webhook endpoint id/,
    );
  });
});

describe("an endpoint's audit trail", () => {
  it("GET /admin/v1/audit?endpointId= lists that endpoint's entries only, newest first, paged", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    const other = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    expect((await patch(e.id, { description: "on call" })).status).toBe(200);
    expect((await patch(other.id, { description: "not this one" })).status).toBe(200);
    await postJson(`/admin/v1/webhooks/${e.id}/roll-secret`, { gracePeriodSeconds: 0 }, ADMIN);
    expect((await patch(e.id, { enabled: false })).status).toBe(200);
    const seen: Array<{ action: string; keyId: string }> = [];
    let cursor: string | null = null;
    do {
      const res = await call(
        `/admin/v1/audit?endpointId=${e.id}&limit=3${cursor ? `&cursor=${cursor}` : ""}`,
        { headers: VIEWER },
      );
      expect(res.status, await res.clone().text()).toBe(200);
      const page = (await res.json()) as { data: typeof seen; nextCursor: string | null };
      seen.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen.map((x) => [x.action, x.keyId])).toEqual([
      ["webhook_update", e.id],
      ["webhook_roll_secret", e.id],
      ["webhook_update", e.id],
      ["webhook_create", e.id],
    ]);
    // Its entries outlive it: deleted, the endpoint's trail ends with the deletion.
    expect(
      (await call(`/admin/v1/webhooks/${e.id}`, { method: "DELETE", headers: ADMIN })).status,
    ).toBe(204);
    const after = await call(`/admin/v1/audit?endpointId=${e.id}&limit=1`, { headers: ADMIN });
    expect(((await after.json()) as { data: typeof seen }).data.map((x) => x.action)).toEqual([
      "webhook_delete",
    ]);
  });

  it.each([
    [
      "keyId with an endpoint's id",
      `keyId=whe_${"a".repeat(20)}`,
      /^keyId: must be a key id \(key_…\); an endpoint's entries: endpointId/,
    ],
    [
      "endpointId with a key's id",
      `endpointId=key_${"a".repeat(20)}`,
      /^endpointId: must be a webhook endpoint id \(whe_…\)/,
    ],
    [
      "both",
      `keyId=key_${"a".repeat(20)}&endpointId=whe_${"a".repeat(20)}`,
      /^endpointId: give keyId or endpointId, not both/,
    ],
  ])("%s → 400 naming the parameter", async (_label, query, message) => {
    const error = await expectError(
      await call(`/admin/v1/audit?${query}`, { headers: ADMIN }),
      400,
      "invalid_request",
    );
    expect(error.message).toMatch(message);
  });
});

describe("rolling the signing secret", () => {
  it("shows the new secret once; both sign during the grace period, then only the new one", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    const res = await postJson(
      `/admin/v1/webhooks/${e.id}/roll-secret`,
      { gracePeriodSeconds: 3600 },
      ADMIN,
    );
    expect(res.status).toBe(201);
    const rolled = (await res.json()) as Endpoint;
    expect(rolled.secret).toMatch(/^whsec_/);
    expect(rolled.secret).not.toBe(e.secret);
    expect(rolled.previousSecretExpiresAt).toBe(new Date(time.now + 3_600_000).toISOString());
    const stored = await getEndpoint(env.DB, e.id);
    const box = await webhookSecretBoxOrThrow(configOrThrow(env));
    expect(await openSigningSecrets(box, stored!, time.now)).toEqual({
      secrets: [rolled.secret, e.secret],
      unopened: [],
    });
    expect((await openSigningSecrets(box, stored!, time.now + 3_600_000)).secrets).toEqual([
      rolled.secret,
    ]);
    const audit = await auditOf(e.id);
    expect(audit[0]?.action).toBe("webhook_roll_secret");
    expect(JSON.stringify(audit)).not.toContain(rolled.secret!.slice(6));
  });

  it("with no grace period the old secret stops signing at once; bad bodies are 400", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    const res = await postJson(
      `/admin/v1/webhooks/${e.id}/roll-secret`,
      { gracePeriodSeconds: 0 },
      ADMIN,
    );
    const rolled = (await res.json()) as Endpoint;
    const box = await webhookSecretBoxOrThrow(configOrThrow(env));
    expect(
      (await openSigningSecrets(box, (await getEndpoint(env.DB, e.id))!, time.now)).secrets,
    ).toEqual([rolled.secret]);
    for (const [body, rule] of [
      [{ gracePeriodSeconds: 604_801 }, /^gracePeriodSeconds: must be at most 604800/],
      [{ gracePeriodSeconds: -1 }, /^gracePeriodSeconds: must be at least 0/],
      [{ secret: "whsec_short" }, /^secret: /],
    ] as const) {
      const error = await expectError(
        await postJson(`/admin/v1/webhooks/${e.id}/roll-secret`, body, ADMIN),
        400,
        "invalid_request",
      );
      expect(error.message).toMatch(rule);
    }
  });
});

describe("concurrent changes to one endpoint", () => {
  it("8 PATCHes and 4 secret rolls at once all land (no 503), each audited once", async () => {
    const e = await create({ url: URL_OK, eventTypes: ["key.banned"] });
    const answers = await Promise.all([
      ...Array.from({ length: 8 }, (_, i) => patch(e.id, { description: `change ${i}` })),
      ...Array.from({ length: 4 }, () =>
        postJson(`/admin/v1/webhooks/${e.id}/roll-secret`, { gracePeriodSeconds: 60 }, ADMIN),
      ),
    ]);
    expect(answers.map((res) => res.status)).toEqual([
      ...Array(8).fill(200),
      ...Array(4).fill(201),
    ]);
    const audit = await auditOf(e.id);
    expect(audit.filter((entry) => entry.action === "webhook_roll_secret")).toHaveLength(4);
    expect(audit.filter((entry) => entry.action === "webhook_update")).toHaveLength(8);
  });
});

describe("the operator document", () => {
  it("describes every event's delivery as an OpenAPI 3.1 webhook: body, signature headers, 2xx and 410", async () => {
    const doc = (await (await call("/admin/v1/openapi.json")).json()) as {
      webhooks: Record<
        string,
        {
          post: {
            parameters: Array<{ name: string; in: string; required: boolean }>;
            requestBody: { content: { "application/json": { schema: { $ref: string } } } };
            responses: Record<string, unknown>;
          };
        }
      >;
      components: {
        schemas: Record<
          string,
          { properties: Record<string, { const?: string; enum?: string[] }> }
        >;
      };
    };
    expect(Object.keys(doc.webhooks).sort()).toEqual(
      [...WEBHOOK_EVENT_TYPES, WEBHOOK_TEST_EVENT].sort(),
    );
    for (const [type, { post }] of Object.entries(doc.webhooks)) {
      expect(
        post.parameters.filter((p) => p.in === "header" && p.required).map((p) => p.name),
      ).toEqual(["webhook-id", "webhook-timestamp", "webhook-signature"]);
      const ref = post.requestBody.content["application/json"].schema.$ref.split("/").pop()!;
      const typeProperty = doc.components.schemas[ref]?.properties.type;
      expect([typeProperty?.const, ...(typeProperty?.enum ?? [])]).toContain(type);
      expect(Object.keys(post.responses).sort()).toEqual(["200", "410"]);
    }
  });
});
