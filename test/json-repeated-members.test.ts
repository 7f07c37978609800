// A JSON object that gives a member name twice is refused (400 naming the member and its object),
// on every operation that takes a JSON body: JSON.parse keeps the last value, other parsers (a
// proxy's, a firewall's, a log reader's) the first, so they would disagree with the store about
// what was sent. A name spelled with escapes is the name it means.
import { describe, expect, it } from "vitest";
import { MAX_SHOWN_PATH_SEGMENTS } from "../src/lib/errors";
import { firstRepeatedMember } from "../src/middleware/json-body";
import { ADMIN, auth, call, expectError, issueKey, petCount } from "./helpers";
import { createEndpoint } from "./webhook-fixtures";

const send = (method: string, path: string, body: string, headers: Record<string, string>) =>
  call(path, { method, headers: { ...headers, "Content-Type": "application/json" }, body });

const repeated = (where: string, name: string) =>
  `${where}: member ${JSON.stringify(name)} is given more than once (each member name once).`;

describe("firstRepeatedMember reads JSON text as written", () => {
  it.each([
    ['{"name":"a","name":"b"}', { path: [], name: "name" }],
    ['{"n\\u0061me":"a","name":"b"}', { path: [], name: "name" }],
    ['{"a":{"x":1,"y":{"z":[1,{"q":1,"q":2}]}}}', { path: ["a", "y", "z", 1], name: "q" }],
    ['[{"a":1},{"a":1,"b":2,"a":3}]', { path: [1], name: "a" }],
    ['{"meta":{"k":"v"},"k":1,"meta":{}}', { path: [], name: "meta" }],
    ['{"a\\"":1,"a\\\\":2,"a\\"":3}', { path: [], name: 'a"' }],
  ])("%s → %j", (text, expected) => {
    expect(firstRepeatedMember(text)).toEqual(expected);
  });

  it.each([
    '{"name":"a","categoryId":1}',
    '{"a":{"a":{"a":1}},"b":{"a":2}}',
    '{"name":"\\"name\\":","x":"name","y":["name","name"]}',
    '[{"a":1},{"a":2}]',
    '{"a\\\\":1,"a":2}',
    '"a"',
    "{}",
  ])("%s → none", (text) => {
    expect(firstRepeatedMember(text)).toBeUndefined();
  });
});

describe("a member name given twice → 400 naming it, nothing done, on every JSON-body operation", () => {
  it("POST /v1/pets: no pet, and the replay of its last-wins reading is not a replay", async () => {
    const { key } = await issueKey();
    const before = await petCount();
    const headers = auth(key, { "Idempotency-Key": crypto.randomUUID() });
    const res = await send("POST", "/v1/pets", '{"name":"X","name":"Y","categoryId":1}', headers);
    expect((await expectError(res, 400, "invalid_request")).message).toBe(repeated("body", "name"));
    expect(await petCount()).toBe(before);

    const spelled = await send(
      "POST",
      "/v1/pets",
      '{"name":"X","categoryId":1,"n\\u0061me":"Y"}',
      auth(key),
    );
    expect((await expectError(spelled, 400, "invalid_request")).message).toBe(
      repeated("body", "name"),
    );
    const single = await send("POST", "/v1/pets", '{"name":"Y","categoryId":1}', headers);
    expect(single.status).toBe(201);
    expect(single.headers.get("Idempotent-Replayed")).toBeNull();
    expect(await petCount()).toBe(before + 1);
  });

  it("POST /admin/v1/keys (also inside meta and limits): no key issued", async () => {
    const count = async () =>
      (await (await call("/admin/v1/keys?q=twice-", { headers: ADMIN })).json()) as {
        data: unknown[];
      };
    const before = (await count()).data.length;
    for (const [body, where, name] of [
      ['{"name":"twice-1","plan":"free","plan":"enterprise"}', "body", "plan"],
      ['{"name":"twice-2","plan":"free","meta":{"team":"a","team":"b"}}', "meta", "team"],
      [
        '{"name":"twice-3","plan":"enterprise","limits":{"perMinute":1,"perDay":9,"perMinute":1000}}',
        "limits",
        "perMinute",
      ],
    ] as const) {
      const res = await send("POST", "/admin/v1/keys", body, ADMIN);
      expect((await expectError(res, 400, "invalid_request")).message).toBe(repeated(where, name));
    }
    expect((await count()).data.length).toBe(before);
  });

  it("PATCH /admin/v1/keys/{id} and POST …/roll: the key is unchanged", async () => {
    const { id, key } = await issueKey("free");
    const patch = await send(
      "PATCH",
      `/admin/v1/keys/${id}`,
      '{"enabled":false,"enabled":true}',
      ADMIN,
    );
    expect((await expectError(patch, 400, "invalid_request")).message).toBe(
      repeated("body", "enabled"),
    );
    const roll = await send(
      "POST",
      `/admin/v1/keys/${id}/roll`,
      '{"gracePeriodSeconds":86400,"gracePeriodSeconds":0}',
      ADMIN,
    );
    expect((await expectError(roll, 400, "invalid_request")).message).toBe(
      repeated("body", "gracePeriodSeconds"),
    );
    const read = (await (await call(`/admin/v1/keys/${id}`, { headers: ADMIN })).json()) as {
      status: string;
      rolledAt: string | null;
    };
    expect(read.status).toBe("active");
    expect(read.rolledAt).toBeNull();
    expect((await call("/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
  });

  it("POST, PATCH /admin/v1/webhooks and POST …/roll-secret: nothing registered or changed", async () => {
    const url = "https://hooks.example.com/twice";
    const create = await send(
      "POST",
      "/admin/v1/webhooks",
      JSON.stringify({ url, eventTypes: ["key.revoked"] }).replace("}", `,"url":"${url}2"}`),
      ADMIN,
    );
    expect((await expectError(create, 400, "invalid_request")).message).toBe(
      repeated("body", "url"),
    );
    const listed = (await (await call("/admin/v1/webhooks", { headers: ADMIN })).json()) as {
      data: { url: string }[];
    };
    expect(listed.data.filter((e) => e.url.startsWith(url))).toEqual([]);

    const { id } = await createEndpoint({ url, eventTypes: ["key.revoked"] });
    const patch = await send(
      "PATCH",
      `/admin/v1/webhooks/${id}`,
      '{"enabled":false,"enabled":true}',
      ADMIN,
    );
    expect((await expectError(patch, 400, "invalid_request")).message).toBe(
      repeated("body", "enabled"),
    );
    const roll = await send(
      "POST",
      `/admin/v1/webhooks/${id}/roll-secret`,
      '{"gracePeriodSeconds":0,"gracePeriodSeconds":60}',
      ADMIN,
    );
    expect((await expectError(roll, 400, "invalid_request")).message).toBe(
      repeated("body", "gracePeriodSeconds"),
    );
    const read = (await (await call(`/admin/v1/webhooks/${id}`, { headers: ADMIN })).json()) as {
      enabled: boolean;
      previousSecretExpiresAt: string | null;
    };
    expect(read.enabled).toBe(true);
    expect(read.previousSecretExpiresAt).toBeNull();
  });

  it("deep inside: the path is shown up to its first segments, then …; a shallow one whole", async () => {
    const { key } = await issueKey();
    const deep = `{"x":${"[".repeat(7000)}{"a":1,"a":2}${"]".repeat(7000)}}`;
    const refused = await send("POST", "/v1/pets", deep, auth(key));
    expect((await expectError(refused, 400, "invalid_request")).message).toBe(
      repeated(`x.${"0.".repeat(MAX_SHOWN_PATH_SEGMENTS - 1)}…`, "a"),
    );
    const atTheCap = `{"x":${"[".repeat(MAX_SHOWN_PATH_SEGMENTS - 1)}{"a":1,"a":2}${"]".repeat(MAX_SHOWN_PATH_SEGMENTS - 1)}}`;
    const whole = await send("POST", "/v1/pets", atTheCap, auth(key));
    expect((await expectError(whole, 400, "invalid_request")).message).toBe(
      repeated(`x${".0".repeat(MAX_SHOWN_PATH_SEGMENTS - 1)}`, "a"),
    );
  });

  it("malformed JSON that also repeats a name is refused as malformed, as before", async () => {
    const { key } = await issueKey();
    const res = await send("POST", "/v1/pets", '{"name":"X","name":"Y"', auth(key));
    const error = await expectError(res, 400, "invalid_request");
    expect(error.message).not.toMatch(/more than once/);
  });
});
