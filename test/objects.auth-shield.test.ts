import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import type { AuthShield } from "../src/objects/auth-shield";
import { ADMIN, alarmOf, auth, call, expectError, issueKey, mockClock, T0 } from "./helpers";

const time = mockClock(T0);

let ipSeq = 0;
const freshIp = () => `203.0.113.${++ipSeq}`;
// Well-formed (so it would reach D1) but not issued.
const WRONG_KEY = `pet_test_${"A".repeat(43)}`;

const listFrom = (ip: string, headers: Record<string, string> = {}) =>
  call("/v1/pets", { headers: { "CF-Connecting-IP": ip, ...headers } });

describe("per-client shield against key guessing", () => {
  it("answers 401 with the shield window's X-RateLimit-* headers, 30 times a minute, then 429", async () => {
    const ip = freshIp();
    time.now = T0 + 15_000;
    for (let i = 1; i <= 30; i++) {
      const res = await listFrom(ip, auth(i % 2 ? WRONG_KEY : "nonsense"));
      await expectError(res, 401, "unauthorized");
      expect(res.headers.get("WWW-Authenticate")).toMatch(/^Bearer realm=/);
      expect(res.headers.get("X-RateLimit-Limit")).toBe("30");
      expect(res.headers.get("X-RateLimit-Remaining")).toBe(String(30 - i));
      expect(res.headers.get("X-RateLimit-Reset")).toBe(String((T0 + MINUTE_MS) / 1000));
      expect(res.headers.get("RateLimit-Policy")).toBe('"minute";q=30;w=60');
      expect(res.headers.get("RateLimit")).toBe(`"minute";r=${30 - i};t=45`);
      expect(res.headers.get("Retry-After")).toBeNull();
    }
    time.now = T0 + 20_200;
    const refused = await listFrom(ip, auth(WRONG_KEY));
    await expectError(refused, 429, "rate_limited");
    expect(refused.headers.get("Retry-After")).toBe("40");
    expect(refused.headers.get("X-RateLimit-Limit")).toBe("30");
    expect(refused.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(refused.headers.get("X-RateLimit-Reset")).toBe(String((T0 + MINUTE_MS) / 1000));

    // Any token that matches no key is refused now, even one that could not be a key…
    await expectError(await listFrom(ip, auth("nonsense")), 429, "rate_limited");
    // … but a request without credentials is not a guess: its 401 shows the client's window as
    // it stands, read and not counted.
    const keyless = await listFrom(ip);
    await expectError(keyless, 401, "unauthorized");
    expect(keyless.headers.get("X-RateLimit-Limit")).toBe("30");
    expect(keyless.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(keyless.headers.get("Retry-After")).toBeNull();
  });

  it("does not affect other clients", async () => {
    const ip = freshIp();
    for (let i = 0; i < 31; i++) await listFrom(ip, auth(WRONG_KEY));
    await expectError(await listFrom(ip, auth(WRONG_KEY)), 429, "rate_limited");

    const other = await listFrom(freshIp(), auth(WRONG_KEY));
    await expectError(other, 401, "unauthorized");
    expect(other.headers.get("X-RateLimit-Remaining")).toBe("29");
  });

  it("lets a valid key the service already knows through from a shielded client, under the key's own limits", async () => {
    const ip = freshIp();
    const { key } = await issueKey("enterprise", { perMinute: 7, perDay: 70 });
    expect((await listFrom(ip, auth(key))).status).toBe(200);
    for (let i = 0; i < 30; i++) await listFrom(ip, auth(WRONG_KEY));
    await expectError(await listFrom(ip, auth(WRONG_KEY)), 429, "rate_limited");

    const res = await listFrom(ip, auth(key));
    expect(res.status).toBe(200);
    expect(res.headers.get("X-RateLimit-Limit")).toBe("7");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("5");
    expect(res.headers.get("RateLimit-Policy")).toBe('"minute";q=7;w=60, "day";q=70;w=86400');
  });

  it("does not count successful authentications", async () => {
    const ip = freshIp();
    const { key } = await issueKey("pro");
    for (let i = 0; i < 40; i++) expect((await listFrom(ip, auth(key))).status).toBe(200);
    const res = await listFrom(ip, auth(WRONG_KEY));
    await expectError(res, 401, "unauthorized");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("29");
  });

  it("opens again when the minute ends", async () => {
    const ip = freshIp();
    for (let i = 0; i < 30; i++) await listFrom(ip, auth(WRONG_KEY));
    time.now = T0 + MINUTE_MS - 1;
    const last = await listFrom(ip, auth(WRONG_KEY));
    await expectError(last, 429, "rate_limited");
    expect(last.headers.get("Retry-After")).toBe("1");

    time.now = T0 + MINUTE_MS;
    const res = await listFrom(ip, auth(WRONG_KEY));
    await expectError(res, 401, "unauthorized");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("29");
    expect(res.headers.get("X-RateLimit-Reset")).toBe(String((T0 + 2 * MINUTE_MS) / 1000));
    // A key issued meanwhile is looked up again, time.now that the client is no longer refused.
    const { key } = await issueKey("pro");
    expect((await listFrom(ip, auth(key))).status).toBe(200);
  });

  it("does not count a revoked key's attempts: 401 invalid_token, the shield window read, guesses unaffected", async () => {
    const ip = freshIp();
    const { id, key } = await issueKey("pro");
    await call(`/admin/v1/keys/${id}`, { method: "DELETE", headers: ADMIN });
    for (let i = 0; i < 40; i++) {
      const res = await listFrom(ip, auth(key));
      await expectError(res, 401, "unauthorized");
      expect(res.headers.get("WWW-Authenticate")).toBe(
        'Bearer realm="animal-store", error="invalid_token"',
      );
      expect(res.headers.get("X-RateLimit-Remaining")).toBe("30");
    }
    const guess = await listFrom(ip, auth(WRONG_KEY));
    await expectError(guess, 401, "unauthorized");
    expect(guess.headers.get("X-RateLimit-Remaining")).toBe("29");
  });

  it("does not count an expired key's attempts, nor requests without credentials or with malformed ones", async () => {
    const ip = freshIp();
    const { key } = await issueKey("pro", undefined, {
      expiresAt: new Date(T0 + 1_000).toISOString(),
    });
    time.now = T0 + 2_000;
    for (let i = 0; i < 40; i++) {
      await expectError(await listFrom(ip, auth(key)), 401, "unauthorized");
      await expectError(await listFrom(ip), 401, "unauthorized");
      await expectError(await listFrom(ip, { Authorization: "Basic dTpw" }), 401, "unauthorized");
      await expectError(await listFrom(ip, { Authorization: "Bearer" }), 400, "invalid_request");
    }
    // 160 failures that were not guesses: a valid key not cached yet still gets in.
    const fresh = await issueKey("pro");
    expect((await listFrom(ip, auth(fresh.key))).status).toBe(200);
    const guess = await listFrom(ip, auth(WRONG_KEY));
    expect(guess.headers.get("X-RateLimit-Remaining")).toBe("29");
  });

  it("leaves the public documents and paths outside /v1 alone", async () => {
    const ip = freshIp();
    for (let i = 0; i < 31; i++) await listFrom(ip, auth(WRONG_KEY));
    expect((await call("/v1/openapi.json", { headers: { "CF-Connecting-IP": ip } })).status).toBe(
      200,
    );
    await expectError(
      await call("/elsewhere", { headers: { "CF-Connecting-IP": ip } }),
      404,
      "not_found",
    );
  });
});

describe("the shield object's cleanup alarm", () => {
  const rows = (shield: DurableObjectStub<AuthShield>) =>
    runInDurableObject(shield, (_i, ctx) => ctx.storage.sql.exec("SELECT * FROM usage").toArray());

  it("is scheduled two minutes after the window starts, and run any earlier it leaves the current window's count", async () => {
    const shield = env.AUTH_SHIELD.getByName("alarm-early.shield.test");
    time.now = T0 + 10_000;
    expect((await shield.countRequest(30)).windows[0]!.remaining).toBe(29);
    expect(await alarmOf(shield)).toBe(T0 + 2 * MINUTE_MS);
    time.now = T0 + MINUTE_MS - 1; // the window's last millisecond
    expect(await runDurableObjectAlarm(shield)).toBe(true);
    expect(await rows(shield)).toHaveLength(1);
    expect((await shield.countRequest(30)).windows[0]!.remaining).toBe(28);
  });

  it("clears the window from the moment it ends, and the next failure starts a window of its own", async () => {
    const shield = env.AUTH_SHIELD.getByName("alarm-end.shield.test");
    time.now = T0 + 10_000;
    await shield.countRequest(30);
    time.now = T0 + MINUTE_MS;
    expect(await runDurableObjectAlarm(shield)).toBe(true);
    expect(await rows(shield)).toHaveLength(0);
    const next = await shield.countRequest(30);
    expect(next.windows[0]).toMatchObject({ remaining: 29, resetAt: T0 + 2 * MINUTE_MS });
    expect(await rows(shield)).toHaveLength(1);
    await evictDurableObject(shield); // what it stored is what it reloads
    expect((await shield.countRequest(30)).windows[0]!.remaining).toBe(28);
  });
});
