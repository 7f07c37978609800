// The fail-open rule (src/quota/fail-open.ts), without an object.
import { describe, expect, it, vi } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { answerWithoutObject, fallbackVerdict, rereadKeyProblem } from "../src/quota/fail-open";
import { fixClock, T0 } from "./helpers";

const limits = (perMinute: number, perDay: number) => ({ perMinute, perDay });

describe("fallbackVerdict (limiter unreachable)", () => {
  const fresh = { minuteStart: 0, admitted: 0 };

  it("lets through at most the per-minute limit in one minute window", () => {
    let state = fresh;
    for (let i = 0; i < 3; i++) {
      const v = fallbackVerdict(state, limits(3, 1000), 0, T0 + i);
      if (!v.admit) throw new Error(`refused request ${i}`);
      state = v.state;
    }
    expect(fallbackVerdict(state, limits(3, 1000), 0, T0 + 10_000)).toEqual({
      admit: false,
      reason: "allowance_used",
      retryAt: T0 + MINUTE_MS,
    });
    expect(fallbackVerdict(state, limits(3, 1000), 0, T0 + MINUTE_MS).admit).toBe(true);
  });

  it("lets nothing through for a key refused in this isolate until that refusal's retryAt", () => {
    const until = T0 + 30_000;
    expect(fallbackVerdict(fresh, limits(3, 1000), until, T0)).toEqual({
      admit: false,
      reason: "refused_before",
      retryAt: until,
    });
    expect(fallbackVerdict(fresh, limits(3, 1000), until, until).admit).toBe(true);
  });
});

describe("answerWithoutObject", () => {
  let n = 0;
  const keyId = () => `key_fail_open_${++n}`;
  const quiet = () => vi.spyOn(console, "warn").mockImplementation(() => {});

  it("overloaded: 429 for a second, with the fallback headers of a used-up allowance", () => {
    const now = T0 + 15_500;
    const answer = answerWithoutObject(
      keyId(),
      limits(100, 1000),
      { overloaded: true, refusal: null },
      now,
    );
    if (answer.admitted) throw new Error("an overloaded object's key was admitted");
    expect(answer.quota).toBe("overloaded");
    expect(answer.error.status).toBe(429);
    expect(answer.error.headers).toEqual({
      "X-RateLimit-Limit": "100",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": String(Math.ceil((now + 1000) / 1000)),
      "RateLimit-Policy": '"fallback";q=100;w=60',
      RateLimit: '"fallback";r=0;t=1',
      "Retry-After": "1",
    });
  });

  it("unreachable: admits up to the per-minute limit, then 503 until the minute ends; the access log says unavailable", () => {
    quiet();
    const id = keyId();
    const unreachable = { overloaded: false, refusal: null };
    const first = answerWithoutObject(id, limits(2, 1000), unreachable, T0 + 1_000);
    expect(first).toMatchObject({ admitted: true, quota: "unavailable" });
    expect(answerWithoutObject(id, limits(2, 1000), unreachable, T0 + 2_000).admitted).toBe(true);
    const used = answerWithoutObject(id, limits(2, 1000), unreachable, T0 + 3_000);
    if (used.admitted) throw new Error("admitted past the fallback allowance");
    expect(used.quota).toBe("unavailable");
    expect(used.error.status).toBe(503);
    expect(used.error.headers["Retry-After"]).toBe("57");
  });

  it("a key refused here before keeps that refusal, and the access log names it", () => {
    const refusal = { outcome: "quota_exceeded" as const, retryAt: T0 + 30_000 };
    const answer = answerWithoutObject(
      keyId(),
      limits(100, 1000),
      { overloaded: false, refusal },
      T0,
    );
    if (answer.admitted) throw new Error("a refused key was admitted");
    expect(answer.quota).toBe("quota_exceeded");
    expect(answer.error.code).toBe("quota_exceeded");
    expect(answer.error.headers["Retry-After"]).toBe("30");
  });
});

describe("rereadKeyProblem", () => {
  let n = 0;
  const keyId = () => `key_reread_${++n}`;

  it("reads the key at most once per 5 s, whatever it found (a problem or none)", async () => {
    const time = fixClock(T0);
    for (const found of ["revoked", null]) {
      const id = keyId();
      const read = vi.fn(async (_now: number) => found);
      expect(await rereadKeyProblem(id, read)).toBe(found);
      time.now += 4_999;
      expect(await rereadKeyProblem(id, read)).toBe(found);
      expect(read).toHaveBeenCalledTimes(1);
      time.now += 1;
      expect(await rereadKeyProblem(id, read)).toBe(found);
      expect(read).toHaveBeenCalledTimes(2);
      time.now -= 5_000; // back to the start, for the next answer
    }
  });

  it("keeps each key's answer apart", async () => {
    fixClock(T0);
    const revoked = keyId();
    const fine = keyId();
    expect(await rereadKeyProblem(revoked, async () => "revoked")).toBe("revoked");
    expect(await rereadKeyProblem(fine, async () => null)).toBeNull();
    expect(await rereadKeyProblem(revoked, async () => null)).toBe("revoked");
  });
});
