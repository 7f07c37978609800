// Property-based tests (fast-check) over the HTTP surface: arbitrary bodies, query strings, path
// segments and headers. Every response is non-5xx, Error-shaped when not 2xx, and a refused
// request never changes the store.

import { env } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { auth, BASE, call, type IssuedKey, issueKey } from "./helpers";

const RUNS = 150;
const TIMEOUT = 60_000;
const MAX_ID = Number.MAX_SAFE_INTEGER;

let key: IssuedKey;
beforeAll(
  async () =>
    void (key = await issueKey("enterprise", { perMinute: 1_000_000, perDay: 1_000_000_000 })),
);
const jsonPost = (body: string): RequestInit => ({
  method: "POST",
  headers: auth(key.key, { "Content-Type": "application/json" }),
  body,
});

/** Row count and highest id ever handed out (AUTOINCREMENT): any write moves one of them. */
async function storeState(): Promise<{ count: number; seq: number }> {
  const sql =
    "SELECT (SELECT COUNT(*) FROM pets) AS count, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'pets'), 0) AS seq";
  return (await env.DB.prepare(sql).first<{ count: number; seq: number }>())!;
}

/** Shortens text for a failure message, escaping lone surrogates (vitest's worker channel refuses ill-formed UTF-16). */
const clip = (text: string, max: number) =>
  (text.length > max ? `${text.slice(0, max)}…` : text).replace(
    /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16)}`,
  );

/**
 * Status < 500; a non-2xx answer is an application/json Error body repeating the status (except a
 * bodiless 304 to a conditional GET). Returns the parsed body.
 */
async function checkShape(res: Response, what: string, conditional = false): Promise<unknown> {
  const text = await res.text();
  const ctx = clip(`${what} -> ${res.status} ${text}`, 600);
  expect(res.status, ctx).toBeLessThan(500);
  // No input reaches an answer's headers unescaped: every value stays visible ASCII, whatever
  // the request sent (the runtime's warning for a non-ASCII header is off in tests: vitest.config.ts).
  res.headers.forEach((value, name) =>
    expect(value, `${ctx}: header ${name}`).toMatch(/^[\x20-\x7e]*$/),
  );
  if (res.status >= 200 && res.status < 300) return text ? JSON.parse(text) : null;
  if (conditional && res.status === 304) return expect(text, ctx).toBe("");
  expect(res.headers.get("Content-Type") ?? "", ctx).toMatch(/^application\/json/);
  const body = JSON.parse(text) as { code: unknown; message: unknown; status: unknown };
  expect(
    { code: typeof body.code, message: typeof body.message, status: body.status },
    ctx,
  ).toEqual({ code: "string", message: "string", status: res.status });
  return body;
}

const isPet = (x: unknown): boolean => {
  const p = (x ?? {}) as { id: number; name: unknown; categoryId: unknown; status: string };
  return (
    Number.isSafeInteger(p.id) &&
    p.id >= 1 &&
    typeof p.name === "string" &&
    Number.isSafeInteger(p.categoryId) &&
    ["available", "pending", "sold"].includes(p.status)
  );
};

/** Sends one request; the store gains exactly one row on a 201 (not a replay) and is unchanged otherwise. */
async function sendAndCheckStore(
  path: string,
  init: RequestInit,
  what: string,
): Promise<{ res: Response; body: unknown }> {
  const before = await storeState();
  const res = await call(path, init);
  const body = await checkShape(res, what, new Headers(init.headers).has("If-None-Match"));
  const after = await storeState();
  if (res.status === 201 && res.headers.get("Idempotent-Replayed") !== "true") {
    expect(isPet(body), what).toBe(true);
    expect(after.count, what).toBe(before.count + 1);
    expect((body as { id: number }).id, what).toBe(after.seq);
  } else {
    expect(after, `${what} -> ${res.status} changed the store`).toEqual(before);
  }
  return { res, body };
}

// ---------------------------------------------------------------- arbitraries
const anyString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.string({ unit: "binary", maxLength: 260, size: "max" }),
);
// Each field right, wrong in type, or at a boundary; any subset present, plus an unknown one.
const nearPet = fc.record(
  {
    name: fc.oneof(
      anyString,
      fc.constantFrom(
        "Rex",
        " ",
        "\u0000",
        "\u0000Rex",
        "a".repeat(200),
        "a".repeat(201),
        "\u{1F436}".repeat(100),
      ),
      fc.jsonValue(),
    ),
    categoryId: fc.oneof(
      fc.integer(),
      fc.double(),
      fc.constantFrom(0, 1, -1, MAX_ID, MAX_ID + 1, 2 ** 63, 1e308, 1.5, "1", null, true),
      fc.jsonValue(),
    ),
    status: fc.oneof(
      fc.constantFrom("available", "pending", "sold", "Sold", "", "AVAILABLE "),
      fc.jsonValue(),
    ),
    extra: fc.jsonValue(),
  },
  { requiredKeys: [] },
);
// Valid but for the name: any UTF-16 string (lone surrogates, NUL, controls, whitespace).
const validishPet = fc.record(
  {
    name: fc.oneof(
      anyString,
      fc.string({
        unit: fc.constantFrom("\u0000", "\ud800", "\udfff", " ", "a", "\u200b", "\ufeff"),
        minLength: 1,
        maxLength: 5,
      }),
    ),
    categoryId: fc.integer({ min: 1, max: MAX_ID }),
    status: fc.constantFrom("available", "pending", "sold"),
  },
  { requiredKeys: ["name", "categoryId"] },
);
const jsonBodies = fc.oneof(
  fc.jsonValue(),
  fc.object(),
  nearPet,
  nearPet,
  validishPet,
  validishPet,
);

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "APPLICATION/JSON",
  " application/json ",
  "application/json;;;",
  "application/jsonx",
  "application/problem+json",
  "text/json",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "",
  "application/json, text/plain",
  "*/*",
];
const contentType = fc.option(fc.constantFrom(...CONTENT_TYPES), { nil: undefined });

/** A header value Headers accepts: Latin-1 without controls (non-ASCII bytes 0x80–0xFF included). */
const headerChar = fc
  .integer({ min: 0x20, max: 0xff })
  .filter((c) => c !== 0x7f)
  .map((c) => String.fromCharCode(c));
const asciiChar = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
// Mostly ASCII, so long values stay common; one value in six is Latin-1 (0x80–0xFF), which
// workerd's Headers accepts (it encodes them as UTF-8).
// size "max" is needed for long values: fast-check otherwise keeps strings to about ten characters.
const headerValue = (maxLength: number) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.string({ unit: asciiChar, maxLength: 40 }) },
    { weight: 2, arbitrary: fc.string({ unit: asciiChar, maxLength, size: "max" }) },
    { weight: 1, arbitrary: fc.string({ unit: headerChar, maxLength: 40 }) },
  );
const headerName = fc
  .stringMatching(/^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,30}$/)
  .filter(
    (n) =>
      ![
        "authorization",
        "cf-connecting-ip",
        "content-length",
        "host",
        "transfer-encoding",
        "connection",
        "content-type",
      ].includes(n.toLowerCase()),
  );

let ipCounter = 0;
/** A fresh client address per run, so failed authentications never trip the AuthShield for later runs. */
const freshIp = () =>
  `10.${(ipCounter >> 16) & 255}.${(ipCounter >> 8) & 255}.${ipCounter++ & 255}`;

describe("POST /v1/pets with arbitrary bodies (slow: each property sends a real request per generated case)", () => {
  it("arbitrary JSON values: non-5xx, Error-shaped refusals, store changes only on 201", {
    timeout: TIMEOUT,
  }, async () => {
    await fc.assert(
      fc.asyncProperty(jsonBodies, async (value) => {
        const text = JSON.stringify(value);
        const { res, body } = await sendAndCheckStore(
          "/v1/pets",
          jsonPost(text),
          `POST ${clip(text, 200)}`,
        );
        if (res.status === 201) {
          const v = value as { name: string; categoryId: number; status?: string };
          const pet = body as { name: string; categoryId: number; status: string };
          // Compared escaped, so a lone surrogate shows up in the failure message as \udXXX.
          expect(JSON.stringify(pet.name), "the stored name is the given name, trimmed").toBe(
            JSON.stringify(v.name.trim()),
          );
          expect(pet).toMatchObject({ categoryId: v.categoryId, status: v.status ?? "available" });
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("raw bytes under any content type: non-5xx, Error-shaped, store unchanged unless 201", {
    timeout: TIMEOUT,
  }, async () => {
    const validPet = new TextEncoder().encode(JSON.stringify({ name: "Rex", categoryId: 1 }));
    // Raw bytes, big enough to cross 16 KiB, or a valid body with one byte flipped/inserted.
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 64, size: "max" }),
      fc.uint8Array({ minLength: 16_000, maxLength: 17_000 }),
      fc
        .tuple(fc.nat(validPet.length), fc.integer({ min: 0, max: 255 }), fc.boolean())
        .map(([at, byte, insert]) => {
          const out = Array.from(validPet);
          if (insert) out.splice(at, 0, byte);
          else out[Math.min(at, out.length - 1)] = byte;
          return new Uint8Array(out);
        }),
    );
    await fc.assert(
      fc.asyncProperty(bytes, contentType, async (body, type) => {
        const headers = auth(key.key, type === undefined ? {} : { "Content-Type": type });
        await sendAndCheckStore(
          "/v1/pets",
          { method: "POST", headers, body },
          `POST ${body.length} bytes as ${JSON.stringify(type)}: ${Array.from(body.slice(0, 40))}`,
        );
      }),
      { numRuns: RUNS },
    );
  });
});

// Shrunk counterexamples of the property above, kept as examples so each stays visible on its own.
const BAD_NAMES: Record<string, string> = {
  "\\u0000 (SQLite length() stops at NUL, so the CHECK fails: 503)": "\u0000",
  "\\u0000Rex": "\u0000Rex",
  "\\ud800 (stored as WTF-8 bytes, read back as three U+FFFD)": "\ud800",
};
describe("names the database cannot hold as given", () => {
  for (const [label, name] of Object.entries(BAD_NAMES)) {
    it(`{"name":"${label}","categoryId":1} is refused with 400`, async () => {
      const { res, body } = await sendAndCheckStore(
        "/v1/pets",
        jsonPost(JSON.stringify({ name, categoryId: 1 })),
        label,
      );
      expect(res.status, clip(JSON.stringify(body), 300)).toBe(400);
    });
  }
});

describe("GET /v1/pets with arbitrary query strings (slow: a real request per generated case)", () => {
  const param = fc.tuple(
    fc.oneof(
      fc.constantFrom("limit", "status", "cursor", "afterId", "LIMIT", "limit[]", "cursor[]", ""),
      fc.string({ maxLength: 10 }),
    ),
    fc.oneof(
      fc.constantFrom(
        "1",
        "20",
        "100",
        "101",
        "0",
        "-1",
        "1e2",
        "0x10",
        "010",
        " 5",
        "available",
        "sold",
        "Sold",
        "",
      ),
      fc.stringMatching(/^[A-Za-z0-9_-]{20,80}$/), // cursor-shaped, but not signed by the service
      fc.constant(0).map(() => realCursor), // a genuine cursor (made for no status filter)
      fc.string({ unit: "grapheme", maxLength: 30 }),
      fc.bigInt().map(String),
    ),
  );
  const encoded = fc
    .array(param, { maxLength: 5 })
    .map((ps) => ps.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&"));
  // Raw text: bad escapes (%zz, %), '+', '#', repeated '&', '=' inside values, non-ASCII.
  const raw = fc.string({
    unit: fc.oneof(
      fc.constantFrom(
        "%",
        "&",
        "=",
        "+",
        "#",
        "?",
        "%zz",
        "%00",
        "%ff",
        "%C3",
        "limit",
        "status",
        "1",
        ";",
      ),
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }),
    ),
    maxLength: 40,
  });

  let realCursor = "";
  it("non-5xx, Error-shaped refusals, and a 200 is a well-formed page", {
    timeout: TIMEOUT,
  }, async () => {
    for (const name of ["q1", "q2"])
      await call("/v1/pets", jsonPost(JSON.stringify({ name, categoryId: 1 })));
    realCursor = /[?&]cursor=([^&>]+)/.exec(
      (await call("/v1/pets?limit=1", { headers: auth(key.key) })).headers.get("Link") ?? "",
    )![1]!;
    await fc.assert(
      fc.asyncProperty(fc.oneof(encoded, raw), async (query) => {
        const res = await call(`/v1/pets?${query}`, { headers: auth(key.key) });
        const body = await checkShape(res, `GET /v1/pets?${query}`);
        if (res.status === 200) {
          const pets = body as Array<{ id: number; status: string }>;
          // Parse as the server does: a '#' starts the fragment, which never reaches it.
          const params = new URL(`${BASE}/v1/pets?${query}`).searchParams;
          const [status, limit] = [params.getAll("status"), params.getAll("limit")];
          expect(
            Array.isArray(pets) &&
              pets.length <= (limit.length === 1 ? Number(limit[0]) : 100) &&
              pets.every(isPet),
            query,
          ).toBe(true);
          expect(pets.map((p) => p.id)).toEqual([...pets.map((p) => p.id)].sort((a, b) => a - b));
          if (status.length === 1) expect(pets.every((p) => p.status === status[0])).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe("GET /v1/pets/{x} with arbitrary path segments", () => {
  it("non-5xx, Error-shaped refusals, and a 200 is the pet named by a decimal id", {
    timeout: TIMEOUT,
  }, async () => {
    const knownId = (
      (await (await call("/v1/pets", jsonPost('{"name":"Known","categoryId":7}'))).json()) as {
        id: number;
      }
    ).id;
    const segment = fc.oneof(
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }).map(encodeURIComponent),
      fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
      fc.nat().map(String),
      fc.constantFrom(
        String(knownId),
        `0${knownId}`,
        `${knownId}.0`,
        `+${knownId}`,
        "0",
        "-0",
        "1e3",
        "0x1",
        "9007199254740991",
        "9007199254740992",
        "%2F",
        "%00",
        "%zz",
        "..",
        "%2e%2e",
        "%E2%80%AE",
        "\u{1F436}",
        "1%20",
        "Infinity",
        "NaN",
      ),
    );
    await fc.assert(
      fc.asyncProperty(segment, async (x) => {
        const res = await call(`/v1/pets/${x}`, { headers: auth(key.key) });
        const body = await checkShape(res, `GET /v1/pets/${x}`);
        if (res.status === 200)
          expect({
            pet: isPet(body),
            decimal: /^[0-9]+$/.test(x),
            id: (body as { id: number }).id,
          }).toEqual({ pet: true, decimal: true, id: Number(x) });
      }),
      { numRuns: RUNS },
    );
  });
});

describe("arbitrary headers (slow: a real request per generated case)", () => {
  it("huge, duplicated, non-ASCII headers and weird content types: non-5xx, Error-shaped, store unchanged unless 201", {
    timeout: TIMEOUT,
  }, async () => {
    const bookmark = fc.stringMatching(/^[0-9a-f]{8}(-[0-9a-f]{8,64}){1,3}$/);
    const request = fc.record({
      route: fc.constantFrom("list", "get", "create"),
      extra: fc.array(fc.tuple(headerName, headerValue(8_000)), { maxLength: 4 }),
      special: fc.array(
        fc.tuple(
          fc.constantFrom(
            "Idempotency-Key",
            "If-None-Match",
            "X-Request-Id",
            "CF-Ray",
            "x-d1-bookmark",
            "Accept",
            "Origin",
            "Content-Encoding",
          ),
          fc.oneof(
            headerValue(200),
            bookmark,
            fc.constantFrom("*", '"x"', 'W/"x"', '""', "a".repeat(256)),
          ),
        ),
        { maxLength: 3 },
      ),
      // How to send the key: alone, duplicated with junk, huge, non-ASCII, oddly spelled, or not at all.
      authorization: fc.oneof(
        fc.constant<string[]>([`Bearer ${key.key}`]),
        fc.tuple(headerValue(8_000)).map(([junk]) => [`Bearer ${key.key}`, junk]),
        fc.constant<string[]>([`Bearer ${key.key}`, `Bearer ${key.key}`]),
        headerValue(8_000).map((v) => [v]),
        fc.constantFrom<string[]>(
          [`bearer ${key.key}`],
          [`Bearer  ${key.key}  `],
          [`Bearer ${key.key}\u00e9`],
          [`Basic ${key.key}`],
          [`Bearer`],
          [],
        ),
      ),
      contentType: fc.oneof(contentType, headerValue(300)),
    });
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const headers = new Headers({ "CF-Connecting-IP": freshIp() });
        for (const [name, value] of [...r.extra, ...r.special]) headers.append(name, value);
        for (const value of r.authorization) headers.append("Authorization", value);
        if (r.contentType !== undefined) headers.set("Content-Type", r.contentType);
        const init: RequestInit =
          r.route === "create"
            ? { method: "POST", headers, body: JSON.stringify({ name: "Hdr", categoryId: 3 }) }
            : { method: "GET", headers };
        const path = r.route === "get" ? "/v1/pets/1" : "/v1/pets";
        const shown = JSON.stringify({
          ...r,
          extra: r.extra.map(([n, v]) => [
            n,
            v.length > 60 ? `${v.slice(0, 60)}…(${v.length})` : v,
          ]),
        });
        await sendAndCheckStore(path, init, `${init.method} ${path} ${clip(shown, 600)}`);
      }),
      { numRuns: RUNS },
    );
  });
});
