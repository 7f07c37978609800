// A location holder whose copy of the key is older than the key's object's policy (a change that
// reached no lease here, so nothing was pushed) answers the Worker with the key as D1 has it now:
// it forgets its copy before it reads the key again, so a read ahead of the same secret started
// before the change, still in flight, is not what it answers with. Answered with that older
// copy, the Worker would have the request decided under it once more (`stale` again) before it
// reads the key itself: one more call to the key's object for the same request.
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { HELD_KEY_EXPECTED_AGE_MS, HELD_KEY_MAX_AGE_MS } from "../src/objects/holder-key-record";
import { holderName } from "../src/objects/quota-holder";
import { QuotaLimiter } from "../src/objects/quota-limiter";
import { PLAN_LIMITS } from "../src/quota/plans";
import { backgroundWork } from "./background-work";
import { auth, BASE, callWith, closedGate, issueKey, mockClock, patchKey, T0 } from "./helpers";

const time = mockClock(T0);
const { passTime } = backgroundWork(time);
let seq = 0;

beforeEach(() => {
  for (const level of ["log", "warn"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});

/** A request with `key` from a cold isolate in location `colo` (it asks the holder to authenticate). */
function sendCold(keyId: string, key: string, colo: string): Promise<Response> {
  forgetKey(keyId);
  return callWith(
    {},
    new Request(`${BASE}/v1/pets?limit=1`, {
      headers: auth(key, { "CF-Connecting-IP": `198.51.100.${++seq % 250}` }),
      cf: { colo },
    } as RequestInit),
  );
}

/**
 * The next D1 read of a key by a secret's hash is made at once and answered only when `open` is
 * called: a read that started before a change and is still in flight after it.
 */
function holdNextKeyRead(): { open: () => void; held: () => boolean } {
  const { gate, open } = closedGate();
  let armed = true;
  let held = false;
  const prepare = env.DB.prepare.bind(env.DB);
  vi.spyOn(env.DB, "prepare").mockImplementation((sql: string) => {
    const statement = prepare(sql);
    if (!armed || !sql.includes("FROM retired_key_secrets WHERE key_hash")) return statement;
    armed = false;
    return new Proxy(statement, {
      get: (s, p) =>
        p === "bind"
          ? (...args: unknown[]) => {
              const bound = s.bind(...args);
              return new Proxy(bound, {
                get: (b, q) =>
                  q === "first"
                    ? async () => {
                        const row = await b.first();
                        held = true;
                        await gate;
                        return row;
                      }
                    : Reflect.get(b, q).bind(b),
              });
            }
          : Reflect.get(s, p).bind(s),
    });
  });
  return { open, held: () => held };
}

/** Counts the key's object's `admit` calls from now on (each a round trip for a request). */
function countAdmits(): () => number {
  let calls = 0;
  const original = QuotaLimiter.prototype.admit;
  vi.spyOn(QuotaLimiter.prototype, "admit").mockImplementation(function (
    this: QuotaLimiter,
    ...args: Parameters<typeof original>
  ) {
    calls++;
    return original.apply(this, args);
  });
  return () => calls;
}

const realMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe("a location holder's copy older than the key's object's policy", () => {
  it("is forgotten before the key is read again: a read ahead still in flight is not answered, and the request costs the key's object two calls, not three", {
    timeout: 30_000,
  }, async () => {
    const { id, key } = await issueKey("free");
    const holder = env.QUOTA_HOLDER.getByName(holderName(id, "AMS"));
    // Two requests 20 s apart (too often for standing permits): the holder reads its copy at the
    // first, and at the second schedules a read ahead, so the copy is HELD_KEY_EXPECTED_AGE_MS old
    // when the next request is expected 20 s on.
    time.now = T0 + 1_000;
    expect((await sendCold(id, key, "AMS")).status).toBe(200);
    await passTime();
    time.now = T0 + 21_000;
    expect((await sendCold(id, key, "AMS")).status).toBe(200);
    await passTime();
    const readAheadAt = T0 + 41_000 - HELD_KEY_EXPECTED_AGE_MS;
    // The holder hands its stock back (a usage read would): it holds no lease, so the change
    // below is not pushed to it, and its copy stays.
    await holder.giveBack(id);
    expect(await holder.unusedPermits()).toBe(0);
    // The read ahead starts; D1 reads the key before the change, the answer is on its way.
    const read = holdNextKeyRead();
    time.now = readAheadAt;
    await passTime();
    // passTime waits for calls to the quota objects, not for D1: the read's answer may be later.
    await vi.waitUntil(read.held, { timeout: 5_000 });
    expect((await patchKey(id, { plan: "pro" })).status).toBe(200);
    // A cold isolate's request with the holder's copy (younger than HELD_KEY_MAX_AGE_MS): the
    // key's object answers `stale`, and the holder answers with the key as D1 has it now.
    time.now = readAheadAt + 1_000;
    expect(time.now - (T0 + 1_000)).toBeLessThan(HELD_KEY_MAX_AGE_MS);
    const admits = countAdmits();
    const sending = sendCold(id, key, "AMS");
    const answeredFirst = await Promise.race([
      sending.then(() => true),
      realMs(500).then(() => false),
    ]);
    read.open();
    const response = await sending;
    expect(response.status).toBe(200);
    expect(response.headers.get("X-RateLimit-Limit"), "decided under the new plan").toBe(
      String(PLAN_LIMITS.pro.perMinute),
    );
    expect(admits(), "one stale answer, then the decision under the new plan").toBe(2);
    expect(answeredFirst, "answered without waiting for the read ahead").toBe(true);
  });
});
