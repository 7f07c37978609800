// A key's `meta` is stored as the operator sent it, or refused: a member named "__proto__" (which
// the JSON schema's walk drops, so `{"__proto__": 1}` used to be stored as `{}` and answered 201)
// is refused with a 400 naming it, at any depth, and nothing is written.
import { describe, expect, it } from "vitest";
import { ADMIN, call, expectError, issueKey } from "./helpers";

const send = (method: string, path: string, text: string) =>
  call(path, { method, headers: { ...ADMIN, "Content-Type": "application/json" }, body: text });

async function keysNamed(name: string): Promise<number> {
  const res = await call(`/admin/v1/keys?q=${name}&limit=100`, { headers: ADMIN });
  return ((await res.json()) as { data: unknown[] }).data.length;
}

describe('meta members named "__proto__"', () => {
  it.each([
    '{"__proto__":{"isAdmin":true}}',
    '{"crm":{"__proto__":1,"id":"X-1"}}',
    '{"list":[{"__proto__":2}]}',
  ])("POST /admin/v1/keys with meta %s → 400 naming it, no key", async (meta) => {
    const name = `proto-${crypto.randomUUID().slice(0, 8)}`;
    const res = await send(
      "POST",
      "/admin/v1/keys",
      `{"name":"${name}","plan":"free","meta":${meta}}`,
    );
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toMatch(/^meta: .*__proto__/);
    expect(await keysNamed(name)).toBe(0);
  });

  it("PATCH with such a meta → 400, the key's meta unchanged", async () => {
    const { id } = await issueKey("free", undefined, { meta: { crm: "X-1" } });
    const res = await send("PATCH", `/admin/v1/keys/${id}`, '{"meta":{"__proto__":{"a":1}}}');
    expect((await expectError(res, 400, "invalid_request")).message).toMatch(/__proto__/);
    const key = await call(`/admin/v1/keys/${id}`, { headers: ADMIN });
    expect(((await key.json()) as { meta: unknown }).meta).toEqual({ crm: "X-1" });
  });

  it('other members, "constructor" and "prototype" included, are stored as sent', async () => {
    const meta = '{"constructor":{"prototype":{"x":1}},"proto":"__proto__"}';
    const res = await send(
      "POST",
      "/admin/v1/keys",
      `{"name":"proto-ok","plan":"free","meta":${meta}}`,
    );
    expect(res.status).toBe(201);
    expect(((await res.json()) as { meta: unknown }).meta).toEqual(JSON.parse(meta));
  });
});
