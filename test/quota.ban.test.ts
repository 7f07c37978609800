import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import {
  ADMIN,
  auth,
  BAN_MS,
  call,
  expectError,
  issueKey,
  keyDetail,
  MIDNIGHT,
  mockClock,
  T0,
} from "./helpers";

const time = mockClock(T0);

const list = (key: string) => call("/v1/pets", { headers: auth(key) });
const iso = (ms: number) => new Date(ms).toISOString();

interface Detail {
  id: string;
  usage: {
    minute: { count: number; limit: number; resetAt: string };
    day: { count: number; limit: number; resetAt: string };
    bannedUntil: string | null;
  } | null;
}

async function detail(id: string): Promise<Detail> {
  const res = await keyDetail(id);
  expect(res.status).toBe(200);
  return (await res.json()) as Detail;
}

/** perMinute 3: 3 admitted, 10 refusals tolerated, the 11th refusal (at `at`) bans the key. */
async function banKey(at: number): Promise<{ id: string; key: string; bannedUntil: number }> {
  const issued = await issueKey("enterprise", { perMinute: 3, perDay: 1000 });
  for (let i = 0; i < 3; i++) expect((await list(issued.key)).status).toBe(200);
  for (let i = 0; i < 10; i++) await expectError(await list(issued.key), 429, "rate_limited");
  time.now = at;
  const res = await list(issued.key);
  await expectError(res, 429, "key_banned");
  expect(res.headers.get("Retry-After")).toBe(String(BAN_MS / 1000));
  return { ...issued, bannedUntil: at + BAN_MS };
}

describe("temporary ban", () => {
  it("bans a key that keeps sending while throttled, with Retry-After = rest of the 15 minute ban", async () => {
    const { key, bannedUntil } = await banKey(T0 + 5_000);

    time.now = T0 + 2 * MINUTE_MS + 250; // a fresh minute with room: still banned
    const res = await list(key);
    await expectError(res, 429, "key_banned");
    expect(res.headers.get("Retry-After")).toBe(String(Math.ceil((bannedUntil - time.now) / 1000)));
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(res.headers.get("X-RateLimit-Reset")).toBe(String(bannedUntil / 1000));
    expect(res.headers.get("RateLimit-Policy")).toBe('"minute";q=3;w=60, "day";q=1000;w=86400');

    time.now = bannedUntil - 1;
    const last = await list(key);
    await expectError(last, 429, "key_banned");
    expect(last.headers.get("Retry-After")).toBe("1");
  });

  it("does not ban below the threshold of max(10, perMinute) refusals in a minute", async () => {
    const { key } = await issueKey("enterprise", { perMinute: 3, perDay: 1000 });
    for (let i = 0; i < 3; i++) expect((await list(key)).status).toBe(200);
    for (let i = 0; i < 10; i++) await expectError(await list(key), 429, "rate_limited");
    time.now = T0 + MINUTE_MS; // refusals of the previous minute no longer count
    for (let i = 0; i < 3; i++) expect((await list(key)).status).toBe(200);
    for (let i = 0; i < 10; i++) await expectError(await list(key), 429, "rate_limited");
  });

  it("lifts the ban by itself when it ends", async () => {
    const { key, bannedUntil } = await banKey(T0 + 5_000);
    time.now = bannedUntil;
    const res = await list(key);
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("2");
  });

  it("shows the ban and the usage in GET /admin/v1/keys/{id}", async () => {
    const { id, bannedUntil } = await banKey(T0 + 5_000);
    time.now = T0 + 30_000;
    const d = await detail(id);
    expect(d.id).toBe(id);
    expect(d.usage).toEqual({
      minute: { count: 3, limit: 3, resetAt: iso(T0 + MINUTE_MS) },
      day: { count: 3, limit: 1000, resetAt: iso(MIDNIGHT) },
      bannedUntil: iso(bannedUntil),
    });
    time.now = bannedUntil;
    expect((await detail(id)).usage!.bannedUntil).toBeNull();
  });

  it("shows usage without a ban for a key in good standing", async () => {
    const { id, key } = await issueKey("enterprise", { perMinute: 3, perDay: 1000 });
    expect((await list(key)).status).toBe(200);
    const d = await detail(id);
    expect(d.usage).toMatchObject({
      minute: { count: 1, limit: 3 },
      day: { count: 1, limit: 1000 },
      bannedUntil: null,
    });
  });

  it("lifts the ban with POST /admin/v1/keys/{id}/unban", async () => {
    const { id, key } = await banKey(T0 + 5_000);
    time.now = T0 + 2 * MINUTE_MS;
    await expectError(await list(key), 429, "key_banned");

    const res = await call(`/admin/v1/keys/${id}/unban`, { method: "POST", headers: ADMIN });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Detail;
    expect(body.id).toBe(id);
    expect(body.usage!.bannedUntil).toBeNull();
    expect(body.usage!.day.count).toBe(3);

    const ok = await list(key);
    expect(ok.status).toBe(200);
    expect(ok.headers.get("X-RateLimit-Remaining")).toBe("2");
    expect((await detail(id)).usage!.bannedUntil).toBeNull();
  });

  it("needs the admin token and an existing key to unban", async () => {
    const { id } = await issueKey("enterprise", { perMinute: 3, perDay: 1000 });
    await expectError(
      await call(`/admin/v1/keys/${id}/unban`, { method: "POST" }),
      401,
      "unauthorized",
    );
    await expectError(
      await call(`/admin/v1/keys/key_AAAAAAAAAAAAAAAAAAAA/unban`, {
        method: "POST",
        headers: ADMIN,
      }),
      404,
      "not_found",
    );
  });
});
