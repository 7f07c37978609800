import { describe, expect, it } from "vitest";
import { ADMIN, auth, call, expectError, issueKey, petCount } from "./helpers";

const encoder = new TextEncoder();

/** `before` + raw `bytes` + `after`, as one body: the bytes are not re-encoded. */
function bodyWith(before: string, bytes: number[], after: string): Uint8Array {
  return new Uint8Array([...encoder.encode(before), ...bytes, ...encoder.encode(after)]);
}

const MALFORMED: Array<[string, number[]]> = [
  ["invalid bytes 0xFF 0xFE", [0x61, 0xff, 0xfe, 0x62]],
  ["a lone continuation byte", [0x61, 0x80]],
  ["an overlong NUL (C0 80)", [0xc0, 0x80]],
  ["a UTF-16 surrogate encoded in UTF-8 (ED A0 80)", [0xed, 0xa0, 0x80]],
  ["a truncated 3-byte sequence", [0xe2, 0x82]],
  ["a code point past U+10FFFF (F4 90 80 80)", [0xf4, 0x90, 0x80, 0x80]],
];

describe("JSON bodies must be well-formed UTF-8", () => {
  for (const [what, bytes] of MALFORMED) {
    it(`POST /v1/pets with ${what} in a name → 400 naming the rule, nothing stored`, async () => {
      const { key } = await issueKey();
      const before = await petCount();
      const res = await call("/v1/pets", {
        method: "POST",
        headers: auth(key, { "Content-Type": "application/json" }),
        body: bodyWith('{"name":"', bytes, '","categoryId":1}'),
      });
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toMatch(/UTF-8/);
      expect(await petCount()).toBe(before);
    });
  }

  it("well-formed multi-byte names (accents, CJK, astral emoji) are still created as sent", async () => {
    const { key } = await issueKey();
    const name = "Zoë 犬 🐕‍🦺";
    const res = await call("/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": "application/json" }),
      body: encoder.encode(JSON.stringify({ name, categoryId: 1 })),
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { name: string }).name).toBe(name);
  });

  it("the operator API refuses malformed UTF-8 too (POST and PATCH /admin/v1/keys)", async () => {
    const post = await call("/admin/v1/keys", {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: bodyWith('{"name":"', [0xff], '","plan":"free"}'),
    });
    expect((await expectError(post, 400, "invalid_request")).message).toMatch(/UTF-8/);

    const { id } = await issueKey("free");
    const patch = await call(`/admin/v1/keys/${id}`, {
      method: "PATCH",
      headers: { ...ADMIN, "Content-Type": "application/json" },
      body: bodyWith('{"name":"', [0xc3], '"}'),
    });
    expect((await expectError(patch, 400, "invalid_request")).message).toMatch(/UTF-8/);
  });
});

describe("JSON bodies are sent uncompressed", () => {
  it.each([
    [
      "gzip",
      () =>
        new Blob([JSON.stringify({ name: "Gz", categoryId: 1 })])
          .stream()
          .pipeThrough(new CompressionStream("gzip")),
    ],
    ["br", () => JSON.stringify({ name: "Br", categoryId: 1 })],
  ])(
    "POST /v1/pets with Content-Encoding: %s → 415 naming the coding, nothing stored",
    async (coding, body) => {
      const { key } = await issueKey();
      const before = await petCount();
      const sent = body();
      const res = await call("/v1/pets", {
        method: "POST",
        headers: auth(key, { "Content-Type": "application/json", "Content-Encoding": coding }),
        body:
          typeof sent === "string" ? sent : new Uint8Array(await new Response(sent).arrayBuffer()),
      });
      const error = await expectError(res, 415, "unsupported_media_type");
      expect(error.message).toBe(
        `The body must be uncompressed UTF-8 JSON sent with Content-Type: application/json (got Content-Type: "application/json", Content-Encoding: "${coding}").`,
      );
      expect(await petCount()).toBe(before);
    },
  );

  it("Content-Encoding: identity is the plain body → 201", async () => {
    const { key } = await issueKey();
    const res = await call("/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": "application/json", "Content-Encoding": "identity" }),
      body: JSON.stringify({ name: "Plain", categoryId: 1 }),
    });
    expect(res.status).toBe(201);
  });
});

describe("a Content-Type that is not application/json is named as sent", () => {
  it.each([
    [";;;==", '(got Content-Type: ";;;==")'],
    ["text/plain; charset=utf-8", '(got Content-Type: "text/plain; charset=utf-8")'],
    ["", "(got no Content-Type)"],
  ])("Content-Type: %j → 415 %s, nothing stored", async (type, got) => {
    const { key } = await issueKey();
    const before = await petCount();
    const res = await call("/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": type }),
      body: JSON.stringify({ name: "Typed", categoryId: 1 }),
    });
    const error = await expectError(res, 415, "unsupported_media_type");
    expect(error.message).toBe(
      `The body must be uncompressed UTF-8 JSON sent with Content-Type: application/json ${got}.`,
    );
    expect(await petCount()).toBe(before);
  });
});

describe("JSON is UTF-8: another charset is refused, in the words of every 415", () => {
  it.each([
    ["application/json; charset=utf-16", 415],
    ['application/json; charset="UTF-16LE"', 415],
    ["application/json; charset=iso-8859-1", 415],
    ["application/json; charset=utf-8", 201],
    ['application/json;charset="UTF-8"', 201],
    ["application/json; foo=bar", 201],
    // A second charset makes the body's charset ambiguous: a reader taking the last reads Latin-1.
    ["application/json; charset=utf-8; charset=iso-8859-1", 415],
    ["application/json; charset=utf-8; CHARSET=utf-16", 415],
    ["application/json; charset=utf-8; charset=utf-8", 415],
  ])("Content-Type: %s → %i", async (type, status) => {
    const { key } = await issueKey();
    const before = await petCount();
    const res = await call("/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": type }),
      body: JSON.stringify({ name: "Charset", categoryId: 1 }),
    });
    if (status === 201) {
      expect(res.status).toBe(201);
      return;
    }
    const error = await expectError(res, 415, "unsupported_media_type");
    expect(error.message).toBe(
      `The body must be uncompressed UTF-8 JSON sent with Content-Type: application/json (got Content-Type: ${JSON.stringify(type)}).`,
    );
    expect(await petCount()).toBe(before);
  });
});

describe("every spelling of application/json that RFC 9110 allows is JSON, for the route too", () => {
  // RFC 9110 §8.3.1: parameters = *( OWS ";" OWS [ parameter ] ): empty parameters and
  // whitespace before ";" are allowed. The router's own media-type check took only
  // `; name=value` parameters and answered the rest a bare "Unsupported Media Type".
  it.each([
    "application/json;",
    "application/json; charset=utf-8;",
    "application/json ;charset=utf-8",
    "application/json;;",
    "APPLICATION/JSON ; Charset=UTF-8",
  ])("POST /v1/pets with Content-Type: %j → 201, stored", async (type) => {
    const { key } = await issueKey();
    const name = `Spelled ${crypto.randomUUID().slice(0, 8)}`;
    const res = await call("/v1/pets", {
      method: "POST",
      headers: auth(key, { "Content-Type": type }),
      body: JSON.stringify({ name, categoryId: 1 }),
    });
    expect(res.status).toBe(201);
    const pet = (await res.json()) as { id: number; name: string };
    expect(pet.name).toBe(name);
    const read = await call(`/v1/pets/${pet.id}`, { headers: auth(key) });
    expect(((await read.json()) as { name: string }).name).toBe(name);
  });

  it("the operator API takes them too (POST /admin/v1/keys with application/json;)", async () => {
    const res = await call("/admin/v1/keys", {
      method: "POST",
      headers: { ...ADMIN, "Content-Type": "application/json;" },
      body: JSON.stringify({ name: "spelled", plan: "free" }),
    });
    expect(res.status).toBe(201);
  });
});
