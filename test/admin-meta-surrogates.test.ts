// A key's `meta` holds well-formed Unicode only, as names, owner ids and descriptions do: a lone
// UTF-16 surrogate (`"\ud800"`, legal as a JSON escape) in a string or a member name, at any
// depth, is a 400 naming `meta`, and nothing is written. A strict UTF-8 reader of the key view
// (Go, Rust's serde) would fail on such a value. A surrogate pair (an emoji) stays allowed.
import { describe, expect, it } from "vitest";
import { ADMIN, call, expectError, issueKey } from "./helpers";

const send = (method: string, path: string, text: string) =>
  call(path, { method, headers: { ...ADMIN, "Content-Type": "application/json" }, body: text });

async function keysNamed(name: string): Promise<number> {
  const res = await call(`/admin/v1/keys?q=${name}&limit=100`, { headers: ADMIN });
  return ((await res.json()) as { data: unknown[] }).data.length;
}

// JSON texts (ASCII, so the body itself is well-formed UTF-8) whose meta has a lone surrogate.
const LONE = [
  ["a high surrogate in a value", '{"crm":"X-\\ud800"}'],
  ["a low surrogate in a value", '{"crm":"\\udc00"}'],
  ["a lone surrogate in a member name", '{"\\ud83d":1}'],
  ["a pair reversed (low, then high)", '{"crm":"\\ude00\\ud83d"}'],
  ["one deep in arrays and objects", '{"a":[{"b":["ok","\\udfff"]}]}'],
  ["one in a nested member name", '{"a":{"b\\udbff":true}}'],
] as const;

describe("meta with lone surrogates", () => {
  it.each(LONE)("POST /admin/v1/keys with %s → 400 naming meta, no key", async (_, meta) => {
    const name = `lone-${crypto.randomUUID().slice(0, 8)}`;
    const res = await send(
      "POST",
      "/admin/v1/keys",
      `{"name":"${name}","plan":"free","meta":${meta}}`,
    );
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toBe("meta: must be well-formed Unicode (no lone surrogates)");
    expect(await keysNamed(name)).toBe(0);
  });

  it("PATCH with such a meta → 400, the key's meta unchanged", async () => {
    const { id } = await issueKey("free", undefined, { meta: { crm: "X-1" } });
    const res = await send("PATCH", `/admin/v1/keys/${id}`, '{"meta":{"crm":"\\ud800"}}');
    expect((await expectError(res, 400, "invalid_request")).message).toMatch(/^meta: .*surrogate/);
    const key = await call(`/admin/v1/keys/${id}`, { headers: ADMIN });
    expect(((await key.json()) as { meta: unknown }).meta).toEqual({ crm: "X-1" });
  });

  it("surrogate pairs (escaped or not) and control characters are stored as sent", async () => {
    const meta = '{"emoji":"\\ud83d\\ude00 😀","\\ud83d\\udc3e":["tab\\there"]}';
    const res = await send(
      "POST",
      "/admin/v1/keys",
      `{"name":"pairs-ok","plan":"free","meta":${meta}}`,
    );
    expect(res.status).toBe(201);
    expect(((await res.json()) as { meta: unknown }).meta).toEqual(JSON.parse(meta));
  });
});
