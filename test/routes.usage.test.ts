// GET /v1/usage: a key's own quota and usage, read without spending its quota.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { USAGE_READS_PER_MINUTE } from "../src/routes/usage/routes";
import {
  ADMIN,
  auth,
  BAN_MS,
  call,
  DAY0,
  expectError,
  issueKey,
  MIDNIGHT,
  mockClock,
  patchKey,
  T0,
} from "./helpers";

const time = mockClock(T0);

const list = (key: string) => call("/v1/pets", { headers: auth(key) });
const usage = (key: string) => call("/v1/usage", { headers: auth(key) });
const iso = (ms: number) => new Date(ms).toISOString();

interface Window {
  limit: number;
  used: number;
  remaining: number;
  resetAt: string;
}
interface Usage {
  key: { id: string; name: string; prefix: string; expiresAt: string | null };
  plan: string;
  limits: { perMinute: number; perDay: number };
  windows: { minute: Window; day: Window };
  ban: { until: string } | null;
  days: Array<{
    day: string;
    admitted: number;
    refused: { rate_limited: number; quota_exceeded: number; key_banned: number };
  }>;
}

async function usageOf(key: string): Promise<{ res: Response; body: Usage }> {
  const res = await usage(key);
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return { res, body: JSON.parse(text) as Usage };
}

const quotaHeaders = (res: Response) =>
  [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "RateLimit",
    "RateLimit-Policy",
  ].map((h) => [h, res.headers.get(h)]);

describe("GET /v1/usage", () => {
  it("is not counted: reading it leaves both windows where the key's requests put them", async () => {
    const issued = await issueKey("enterprise", { perMinute: 5, perDay: 100 });
    for (let i = 0; i < 2; i++) expect((await list(issued.key)).status).toBe(200);
    for (let i = 0; i < 10; i++) await usageOf(issued.key);
    const { body } = await usageOf(issued.key);
    expect(body.windows.minute).toMatchObject({ limit: 5, used: 2, remaining: 3 });
    expect(body.windows.day).toMatchObject({ limit: 100, used: 2, remaining: 98 });
    // The next counted request is the third, not the fourteenth.
    const next = await list(issued.key);
    expect(next.status).toBe(200);
    expect(next.headers.get("RateLimit")).toBe(
      `"minute";r=2;t=60, "day";r=97;t=${(MIDNIGHT - T0) / 1000}`,
    );
    expect(body.days.at(-1)).toEqual({
      day: "2030-06-10",
      admitted: 2,
      refused: { rate_limited: 0, quota_exceeded: 0, key_banned: 0 },
      stranded: 0,
    });
  });

  it("answers with honest windows and the usual quota headers, as the next request would see them", async () => {
    const issued = await issueKey("enterprise", { perMinute: 3, perDay: 5 });
    time.now = T0 + 12_000;
    let last: Response | undefined;
    for (let i = 0; i < 3; i++) last = await list(issued.key);
    expect(last?.status).toBe(200);
    const { res, body } = await usageOf(issued.key);
    expect(body).toMatchObject({
      key: { id: issued.id, name: "test-enterprise", expiresAt: null },
      plan: "enterprise",
      limits: { perMinute: 3, perDay: 5 },
      windows: {
        minute: { limit: 3, used: 3, remaining: 0, resetAt: iso(T0 + MINUTE_MS) },
        day: { limit: 5, used: 3, remaining: 2, resetAt: iso(MIDNIGHT) },
      },
      ban: null,
    });
    expect(issued.key.startsWith(body.key.prefix)).toBe(true);
    // The same headers the third request got, at the same instant.
    expect(quotaHeaders(res)).toEqual(quotaHeaders(last!));
    expect(res.headers.get("RateLimit")).toBe(
      `"minute";r=0;t=48, "day";r=2;t=${(MIDNIGHT - time.now) / 1000}`,
    );
    expect(res.headers.get("Retry-After")).toBeNull();
    // Over its per-minute limit the key is refused, but its usage still answers.
    await expectError(await list(issued.key), 429, "rate_limited");
    const after = (await usageOf(issued.key)).body;
    expect(after.windows.minute.used).toBe(3);
    expect(after.days.at(-1)?.refused.rate_limited).toBe(1);
  });

  it("returns the last 30 days, oldest first, today last, with the days D1 holds", async () => {
    const issued = await issueKey("pro");
    await env.DB.prepare(
      "INSERT INTO key_usage_days (key_id, day, admitted, rate_limited, quota_exceeded, key_banned, stranded) VALUES (?1, '2030-06-01', 40, 1, 2, 3, 4), (?1, '2030-05-11', 7, 0, 0, 0, 0), (?1, '2030-05-10', 99, 0, 0, 0, 0)",
    )
      .bind(issued.id)
      .run();
    expect((await list(issued.key)).status).toBe(200);
    const { body } = await usageOf(issued.key);
    expect(body.days).toHaveLength(30);
    expect(body.days[0]).toEqual({
      day: "2030-05-12",
      admitted: 0,
      refused: { rate_limited: 0, quota_exceeded: 0, key_banned: 0 },
      stranded: 0,
    });
    expect(body.days.find((d) => d.day === "2030-06-01")).toEqual({
      day: "2030-06-01",
      admitted: 40,
      refused: { rate_limited: 1, quota_exceeded: 2, key_banned: 3 },
      stranded: 4,
    });
    expect(body.days.at(-1)?.day).toBe("2030-06-10");
    expect(body.days.at(-1)?.admitted).toBe(1);
    expect(body.days.map((d) => d.day)).toEqual(
      Array.from({ length: 30 }, (_, i) =>
        new Date(DAY0 - (29 - i) * DAY_MS).toISOString().slice(0, 10),
      ),
    );
  });

  it(`has its own limit: ${USAGE_READS_PER_MINUTE} reads a key and minute, then 429 with Retry-After; the key's quota is untouched`, async () => {
    const issued = await issueKey("pro");
    const other = await issueKey("pro");
    time.now = T0 + 20_000;
    for (let i = 0; i < USAGE_READS_PER_MINUTE; i++)
      expect((await usage(issued.key)).status).toBe(200);
    const refused = await usage(issued.key);
    await expectError(refused, 429, "rate_limited");
    expect(refused.headers.get("Retry-After")).toBe("40");
    expect(refused.headers.get("X-RateLimit-Limit")).toBe(String(USAGE_READS_PER_MINUTE));
    expect(refused.headers.get("X-RateLimit-Remaining")).toBe("0");
    // The key's API requests are not affected, nor is another key's usage.
    const res = await list(issued.key);
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe(String(issued.limits.perMinute - 1));
    expect((await usage(other.key)).status).toBe(200);
    // The next minute, reads are allowed again.
    time.now = T0 + MINUTE_MS;
    expect((await usageOf(issued.key)).body.windows.day.used).toBe(1);
  });

  it("answers a banned key with its ban and headers that say so (Remaining 0 until the ban ends)", async () => {
    const issued = await issueKey("enterprise", { perMinute: 3, perDay: 1000 });
    for (let i = 0; i < 3; i++) expect((await list(issued.key)).status).toBe(200);
    for (let i = 0; i < 10; i++) await expectError(await list(issued.key), 429, "rate_limited");
    time.now = T0 + 5_000;
    await expectError(await list(issued.key), 429, "key_banned");
    const bannedUntil = T0 + 5_000 + BAN_MS;
    time.now = T0 + 2 * MINUTE_MS; // a fresh minute: the ban, not the window, is what refuses
    const { res, body } = await usageOf(issued.key);
    expect(body.ban).toEqual({ until: iso(bannedUntil) });
    expect(body.windows.minute).toMatchObject({ used: 0, remaining: 3 });
    expect(body.days.at(-1)?.refused).toEqual({
      rate_limited: 10,
      quota_exceeded: 0,
      key_banned: 1,
    });
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(res.headers.get("X-RateLimit-Reset")).toBe(String(bannedUntil / 1000));
    expect(res.headers.get("Retry-After")).toBeNull();
    // After an unban, no ban.
    expect(
      (await call(`/admin/v1/keys/${issued.id}/unban`, { method: "POST", headers: ADMIN })).status,
    ).toBe(200);
    expect((await usageOf(issued.key)).body.ban).toBeNull();
  });

  it("refuses a revoked or disabled key (401), like every /v1 route", async () => {
    const revoked = await issueKey("pro");
    expect((await usage(revoked.key)).status).toBe(200);
    expect(
      (await call(`/admin/v1/keys/${revoked.id}`, { method: "DELETE", headers: ADMIN })).status,
    ).toBe(200);
    const res = await usage(revoked.key);
    const body = await expectError(res, 401, "unauthorized");
    expect(body.message).toMatch(/revoked/);
    expect(res.headers.get("WWW-Authenticate")).toMatch(/invalid_token/);

    const disabled = await issueKey("pro");
    expect((await patchKey(disabled.id, { enabled: false })).status).toBe(200);
    expect((await expectError(await usage(disabled.key), 401, "unauthorized")).message).toMatch(
      /disabled/,
    );
    await expectError(await call("/v1/usage"), 401, "unauthorized");
  });

  it("is in the public OpenAPI document, free of the D1 bookmark the pets routes take", async () => {
    const doc = (await (await call("/v1/openapi.json")).json()) as {
      paths: Record<
        string,
        Record<string, { operationId: string; parameters?: Array<{ name: string }> }>
      >;
    };
    const op = doc.paths["/usage"]?.get;
    expect(op?.operationId).toBe("getUsage");
    expect((op?.parameters ?? []).map((p) => p.name)).toEqual([]);
  });
});
