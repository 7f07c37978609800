// The fail-open rule (src/quota/fail-open.ts), without an object.
import { describe, expect, it, vi } from "vitest";
import { DAY_MS, MINUTE_MS } from "../src/lib/clock";
import { answerWithoutObject, fallbackVerdict, rereadKeyProblem } from "../src/quota/fail-open";
import { EMPTY_USAGE } from "../src/quota/windows";
import { fixClock, T0 } from "./helpers";

const limits = (perMinute: number, perDay: number) => ({ perMinute, perDay });

describe("fallbackVerdict (limiter unreachable)", () => {
  const fresh = EMPTY_USAGE;

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

  it("lets through at most the per-day limit in one UTC day, however many minutes it spans", () => {
    let state = fresh;
    const dayStart = T0 - (T0 % DAY_MS);
    for (let i = 0; i < 5; i++) {
      const v = fallbackVerdict(state, limits(3, 5), 0, T0 + i * MINUTE_MS);
      if (!v.admit) throw new Error(`refused request ${i}`);
      state = v.state;
    }
    expect(fallbackVerdict(state, limits(3, 5), 0, T0 + 10 * MINUTE_MS)).toEqual({
      admit: false,
      reason: "allowance_used",
      retryAt: dayStart + DAY_MS,
    });
    expect(fallbackVerdict(state, limits(3, 5), 0, dayStart + DAY_MS).admit).toBe(true);
  });

  it("a clock that steps back stays in the window the allowance reached", () => {
    let state = fresh;
    for (let i = 0; i < 3; i++) {
      const v = fallbackVerdict(state, limits(3, 1000), 0, T0 + MINUTE_MS + i);
      if (!v.admit) throw new Error(`refused request ${i}`);
      state = v.state;
    }
    expect(fallbackVerdict(state, limits(3, 1000), 0, T0 + MINUTE_MS - 1_000)).toEqual({
      admit: false,
      reason: "allowance_used",
      retryAt: T0 + 2 * MINUTE_MS,
    });
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

  it("unreachable for a whole day: admits at most the per-day limit in it, one minute after another", () => {
    quiet();
    const id = keyId();
    const unreachable = { overloaded: false, refusal: null };
    const dayStart = T0 - (T0 % DAY_MS);
    let admitted = 0;
    for (let minute = 0; minute < 10; minute++) {
      for (let i = 0; i < 4; i++) {
        const at = T0 + minute * MINUTE_MS + i;
        if (answerWithoutObject(id, limits(4, 10), unreachable, at).admitted) admitted++;
      }
    }
    expect(admitted).toBe(10);
    const refused = answerWithoutObject(id, limits(4, 10), unreachable, T0 + 20 * MINUTE_MS);
    if (refused.admitted) throw new Error("admitted past the day's fallback allowance");
    expect(refused.error.status).toBe(503);
    expect(refused.error.headers["X-RateLimit-Reset"]).toBe(String((dayStart + DAY_MS) / 1000));
  });

  describe("failing for good (the object cannot open, or its own code throws)", () => {
    const broken = {
      overloaded: false,
      refusal: null,
      persistentFailure:
        "object cannot open: its stored schema version 11 is newer than this code reads (10)",
    };

    it("answers 503 with Retry-After to the minute's end and admits nothing, with the allowance untouched", () => {
      const errors = vi.spyOn(console, "error").mockImplementation(() => {});
      const id = keyId();
      const now = T0 + 15_000;
      const answer = answerWithoutObject(id, limits(100, 1000), broken, now);
      if (answer.admitted) throw new Error("a key whose object fails for good was admitted");
      expect(answer.quota).toBe("unavailable");
      expect(answer.error.status).toBe(503);
      expect(answer.error.code).toBe("service_unavailable");
      expect(answer.error.headers).toMatchObject({
        "Retry-After": "45",
        "X-RateLimit-Remaining": "0",
        "RateLimit-Policy": '"fallback";q=100;w=60',
      });
      expect(errors).toHaveBeenCalledTimes(1);
    });

    it("logs one error line with the cause per key per minute, not one per request", () => {
      const errors = vi.spyOn(console, "error").mockImplementation(() => {});
      const id = keyId();
      const other = keyId();
      for (let i = 0; i < 20; i++)
        answerWithoutObject(id, limits(100, 1000), broken, T0 + i * 1000);
      expect(errors).toHaveBeenCalledTimes(1);
      expect(String(errors.mock.calls[0]![0])).toContain(broken.persistentFailure);
      expect(String(errors.mock.calls[0]![0])).toContain(id);
      answerWithoutObject(other, limits(100, 1000), broken, T0 + 30_000);
      expect(errors).toHaveBeenCalledTimes(2);
      answerWithoutObject(id, limits(100, 1000), broken, T0 + MINUTE_MS);
      expect(errors).toHaveBeenCalledTimes(3);
    });

    it("a refusal seen here that has ended is no longer answered: 503", () => {
      vi.spyOn(console, "error").mockImplementation(() => {});
      const refusal = { outcome: "rate_limited" as const, retryAt: T0 - 1 };
      const answer = answerWithoutObject(keyId(), limits(100, 1000), { ...broken, refusal }, T0);
      if (answer.admitted) throw new Error("admitted with its object failing for good");
      expect(answer.error.code).toBe("service_unavailable");
      expect(answer.error.headers["Retry-After"]).toBe("60");
    });

    it("a key refused here before keeps that refusal while it lasts", () => {
      vi.spyOn(console, "error").mockImplementation(() => {});
      const refusal = { outcome: "key_banned" as const, retryAt: T0 + 5 * MINUTE_MS };
      const answer = answerWithoutObject(keyId(), limits(100, 1000), { ...broken, refusal }, T0);
      if (answer.admitted) throw new Error("a banned key was admitted");
      expect(answer.quota).toBe("key_banned");
      expect(answer.error.headers["Retry-After"]).toBe("300");
    });
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
