import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ADMIN,
  auth,
  call,
  callWith,
  expectError,
  fixClock,
  issueKey,
  postJson,
  preparingDb,
} from "./helpers";

const REALM = 'Bearer realm="animal-store"';
const INVALID_TOKEN = /^Bearer realm="animal-store", error="invalid_token"$/;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Each test that fails authentication on purpose comes from its own address, so the per-client
// failure shield (30 a minute, another issue) never turns these 401s into 429s.
let ip = 0;
const fromNewClient = (headers: Record<string, string> = {}) => ({
  "CF-Connecting-IP": `198.51.100.${++ip}`,
  ...headers,
});

function wellFormedUnknownKey(): string {
  let s = "";
  for (const b of crypto.getRandomValues(new Uint8Array(43))) s += BASE62[b % 62];
  return `pet_test_${s}`;
}

async function sha256Hex(text: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

afterEach(() => vi.restoreAllMocks());

describe("401 unauthorized", () => {
  it("without an Authorization header: plain challenge, no error parameter", async () => {
    const res = await call("/v1/pets", { headers: fromNewClient() });
    expect(res.headers.get("WWW-Authenticate")).toBe(REALM);
    await expectError(res, 401, "unauthorized");
  });

  it("with another scheme (Basic)", async () => {
    const { key } = await issueKey();
    const res = await call("/v1/pets", {
      headers: fromNewClient({ Authorization: `Basic ${btoa(`${key}:`)}` }),
    });
    expect(res.headers.get("WWW-Authenticate")).toMatch(/^Bearer realm="animal-store"/);
    await expectError(res, 401, "unauthorized");
  });

  it.each([
    ["not a key", "not-a-key"],
    ["wrong prefix", `pet_prod_${"a".repeat(43)}`],
    ["too short", `pet_test_${"a".repeat(42)}`],
    ["too long", `pet_test_${"a".repeat(44)}`],
    ["non-base62 character", `pet_test_${"a".repeat(42)}-`],
    ["unknown well-formed key", wellFormedUnknownKey()],
  ])('with a token that is %s: error="invalid_token"', async (_label, token) => {
    const res = await call("/v1/pets", { headers: fromNewClient(auth(token)) });
    expect(res.headers.get("WWW-Authenticate")).toMatch(INVALID_TOKEN);
    await expectError(res, 401, "unauthorized");
  });

  it("a revoked key is refused on its very next request, even when warm", async () => {
    const { id, key } = await issueKey();
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    expect((await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN })).status).toBe(
      200,
    );
    const res = await call("/v1/pets", { headers: fromNewClient(auth(key)) });
    expect(res.headers.get("WWW-Authenticate")).toMatch(INVALID_TOKEN);
    await expectError(res, 401, "unauthorized");
    const again = await postJson(
      "/v1/pets",
      { name: "x", categoryId: 1 },
      fromNewClient(auth(key)),
    );
    await expectError(again, 401, "unauthorized");
  });

  it("an expired key is refused once the clock passes its expiry", async () => {
    const now = Date.now();
    const expiresAt = new Date(now + 3_600_000).toISOString();
    const { key } = await issueKey("pro", undefined, { expiresAt });
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    const time = fixClock(now + 3_600_000 - 1_000);
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    time.now = now + 3_600_000 + 1;
    const res = await call("/v1/pets", { headers: fromNewClient(auth(key)) });
    expect(res.headers.get("WWW-Authenticate")).toMatch(INVALID_TOKEN);
    await expectError(res, 401, "unauthorized");
  });

  it("an empty Bearer token or a token with spaces is a malformed request: 400 invalid_request", async () => {
    for (const value of ["Bearer", "Bearer ", "Bearer a b"]) {
      const res = await call("/v1/pets", { headers: fromNewClient({ Authorization: value }) });
      await expectError(res, 400, "invalid_request");
      expect(res.headers.get("WWW-Authenticate")).toMatch(/error="invalid_request"/);
    }
  });

  it("the admin token is not an API key", async () => {
    await expectError(
      await call("/v1/pets", { headers: fromNewClient(ADMIN) }),
      401,
      "unauthorized",
    );
  });
});

describe("authentication comes before validation", () => {
  it("bad query, bad path, bad body, wrong media type, oversized body: all 401 without a key", async () => {
    const bad = wellFormedUnknownKey();
    const headers = fromNewClient();
    const cases: Array<Promise<Response>> = [
      call("/v1/pets?limit=abc", { headers }),
      call("/v1/pets?status=LOST", { headers: { ...headers, ...auth(bad) } }),
      call("/v1/pets/abc", { headers }),
      postJson("/v1/pets", "{not json", headers),
      postJson("/v1/pets", { name: "", categoryId: -1, extra: 1 }, { ...headers, ...auth(bad) }),
      call("/v1/pets", {
        method: "POST",
        headers: { ...headers, "Content-Type": "text/plain" },
        body: "hi",
      }),
      postJson("/v1/pets", { name: "x".repeat(40_000), categoryId: 1 }, headers),
    ];
    for (const res of await Promise.all(cases)) await expectError(res, 401, "unauthorized");
  });
});

describe("keys", () => {
  it("accepts the scheme name case-insensitively", async () => {
    const { key } = await issueKey();
    expect((await call("/v1/pets", { headers: { Authorization: `bearer ${key}` } })).status).toBe(
      200,
    );
  });

  it("have the pet_test_ prefix, 43 base62 characters (≥ 256 bits), the key's id and a 128-bit tag, all different", async () => {
    const keys = await Promise.all([issueKey(), issueKey(), issueKey()]);
    for (const { id, key } of keys) {
      const m = key.match(/^pet_test_[0-9A-Za-z]{43}_([0-9A-Za-z]{20})_[0-9a-f]{32}$/);
      expect(m?.[1] && `key_${m[1]}`).toBe(id);
    }
    expect(new Set(keys.map((k) => k.key.slice(0, "pet_test_".length + 43))).size).toBe(3);
  });

  it("only a SHA-256 hash and a short display prefix are stored", async () => {
    const issued = await issueKey();
    const row = await env.DB.prepare("SELECT * FROM api_keys WHERE id = ?1")
      .bind(issued.id)
      .first<Record<string, unknown>>();
    expect(row).not.toBeNull();
    const secret = issued.key.slice("pet_test_".length);
    for (const [column, value] of Object.entries(row!)) {
      expect(String(value), column).not.toContain(issued.key);
      expect(String(value), column).not.toContain(secret.slice(0, 16));
    }
    expect(row!.key_hash).toBe(await sha256Hex(issued.key));
    expect(String(row!.key_prefix).length).toBeLessThanOrEqual(16);
    expect(issued.key.startsWith(String(row!.key_prefix))).toBe(true);
  });

  it("never appear in logs", async () => {
    const lines: string[] = [];
    const capture = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
    for (const level of ["log", "info", "warn", "error", "debug"] as const)
      vi.spyOn(console, level).mockImplementation(capture);
    const { key } = await issueKey();
    const unknown = wellFormedUnknownKey();
    await call("/v1/pets", { headers: auth(key) });
    await postJson("/v1/pets", { name: "logged", categoryId: 1 }, auth(key));
    await call("/v1/pets", { headers: fromNewClient(auth(unknown)) });
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).not.toContain(key);
      expect(line).not.toContain(unknown);
      expect(line).not.toContain(env.ADMIN_TOKEN);
    }
  });
});

describe("a cached key near the end of its entry", () => {
  it("is re-read after the response, so a change made behind the cache shows before the entry ends", async () => {
    const time = fixClock(Date.UTC(2030, 0, 1, 12));
    const { id, key } = await issueKey("pro");
    const list = () => callWith({}, "/v1/pets?limit=1", { headers: auth(key) }, { wait: true });
    expect((await list()).status).toBe(200); // cached from here, for 30 s
    // Disabled behind the cache's back (straight in D1, as another isolate's write would be).
    await env.DB.prepare("UPDATE api_keys SET disabled_at = ?1 WHERE id = ?2")
      .bind(time.now, id)
      .run();
    time.now += 26_000; // the entry asks for a re-read from 25 s on
    expect((await list()).status).toBe(200); // answered from the cache; re-read after it
    time.now += 1_000; // still 3 s before the entry would end
    await expectError(await list(), 401, "unauthorized");
  });

  it("keeps what it re-read: the key's next requests, past the old entry's end, read no D1 for it", async () => {
    const time = fixClock(Date.UTC(2030, 0, 1, 13));
    const { key } = await issueKey("pro"); // issued through the admin API: not cached yet
    const { db, prepared: keyReads } = preparingDb((sql) =>
      sql.includes("FROM api_keys WHERE key_hash = ?1"),
    );
    const list = () =>
      callWith({ DB: db }, "/v1/pets?limit=1", { headers: auth(key) }, { wait: true });
    expect((await list()).status).toBe(200);
    expect(keyReads).toHaveLength(1); // looked up, cached for 30 s
    time.now += 26_000;
    expect((await list()).status).toBe(200);
    expect(keyReads).toHaveLength(2); // answered from the cache, re-read after the response
    time.now += 5_000; // past the first entry's end, 5 s into the re-read's
    expect((await list()).status).toBe(200);
    expect(keyReads).toHaveLength(2);
  });
});
