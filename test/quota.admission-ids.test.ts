// Every admission carries an id made by the Worker for its request, and the tier that decides it
// counts it once however many times it is asked: a call retried after a `.retryable` error that
// reached the callee, an isolate falling back from a failed holder call to the key's object, a
// cold isolate whose holder decided along with authenticating and then could not answer.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { MINUTE_MS } from "../src/lib/clock";
import { holderName } from "../src/objects/quota-holder";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { QuotaLimiterClient } from "../src/objects/quota-limiter-client";
import { LeaseHolder } from "../src/quota/lease-holder";
import {
  ADMISSION_CLOCK_TOLERANCE_MS,
  ADMISSION_ID_LIFETIME_MS,
  ADMISSION_MEMORY_MS,
  admissionIdLive,
  admissionIdMadeAt,
  newAdmissionId,
} from "../src/quota/lease-messages";
import { auth, BASE, callWith, closedGate, issueKey, mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);
let seq = 0;
const newKeyId = () => `admission_ids_${++seq}`;
type Stub = DurableObjectStub<QuotaLimiter>;

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});
afterEach(() => vi.restoreAllMocks());

/** An error as a Durable Object call throws it when its connection broke: retryable. */
const connectionLost = () =>
  Object.assign(new Error("Network connection lost."), { retryable: true });

/**
 * A namespace whose objects really get each call named in `methods`, but whose first `lose` of
 * those calls lose their answer on the way back (`error()` instead): the callee acted.
 */
function losingAnswers<T>(
  namespace: { getByName(name: string): unknown },
  methods: string[],
  {
    lose = 1,
    error = connectionLost,
    beforeLastLoss = async () => undefined,
  }: {
    lose?: number;
    error?: () => Error;
    /** Runs as the last answer to lose is lost (before the caller hears of it). */
    beforeLastLoss?: () => Promise<void>;
  } = {},
) {
  const state = { lost: 0, calls: 0 };
  const getByName = (name: string) => {
    const stub = namespace.getByName(name) as Record<string, unknown>;
    return new Proxy(stub, {
      get: (target, prop) => {
        const value = Reflect.get(target, prop);
        if (typeof prop !== "string" || !methods.includes(prop) || typeof value !== "function")
          return value;
        return async (...args: unknown[]) => {
          state.calls++;
          const answer = await Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
          if (state.lost < lose) {
            state.lost++;
            if (state.lost === lose) await beforeLastLoss();
            throw error();
          }
          return answer;
        };
      },
    });
  };
  return { namespace: { getByName } as unknown as T, state };
}

const daysOf = (stub: Stub) =>
  runInDurableObject(stub, (instance: QuotaLimiter) => instance.report().days);

describe("the key's object counts an admission id once", () => {
  const policy = policyWith(3, 1_000);

  it("asked twice with one id: the same decision, counted once in the windows and the history", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    const first = await stub.admit(policy, { want: 0, returning: [], admissionId: "a1" });
    time.now += 10;
    const again = await stub.admit(policy, { want: 0, returning: [], admissionId: "a1" });
    // The same decision, answered at the time asked again (a caller places a lease by it), marked
    // repeated (a location holder asked so on a first attempt uses none of its lease).
    expect(again).toEqual({ ...first, now: first.now + 10, repeated: true });
    expect((await stub.usage()).minute.count).toBe(1);
    // Another id is another request.
    await stub.admit(policy, { want: 0, returning: [], admissionId: "a2" });
    expect((await stub.usage()).minute.count).toBe(2);
    expect((await daysOf(stub))[0]?.admitted).toBe(2);
  });

  it("a refusal asked again is not refused again: the ban counts each request once", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    const limited = policyWith(1, 1_000);
    await stub.admit(limited, { want: 0, returning: [], admissionId: "ok" });
    const refused = await stub.admit(limited, { want: 0, returning: [], admissionId: "r1" });
    expect(refused.outcome).toBe("rate_limited");
    for (let i = 0; i < 20; i++)
      expect(await stub.admit(limited, { want: 0, returning: [], admissionId: "r1" })).toEqual({
        ...refused,
        repeated: true,
      });
    expect((await stub.usage()).bannedUntil).toBeNull();
    expect((await daysOf(stub))[0]?.refused.rate_limited).toBe(1);
  });

  it("a lease granted with it is the same lease when asked again, its permits counted once", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    const roomy = policyWith(100, 1_000);
    const first = await stub.admit(roomy, { want: 5, returning: [], admissionId: "l1" });
    expect(first.lease?.permits).toBe(5);
    const again = await stub.admit(roomy, { want: 5, returning: [], admissionId: "l1" });
    expect(again.lease).toEqual(first.lease);
    expect((await stub.usage()).minute.count).toBe(6);
  });

  it("a lease renewal delivered twice is granted once", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    const roomy = policyWith(100, 1_000);
    const first = await stub.admit(roomy, { want: 4, returning: [], admissionId: "r0" });
    expect(first.lease?.permits).toBe(4);
    const asked = {
      leaseId: first.lease!.id,
      want: 4,
      holding: 0,
      returning: [],
      used: 4,
      renewalId: "n1",
    };
    const once = await stub.renewLease(roomy, asked);
    expect(once.granted?.permits).toBe(4);
    time.now += 10;
    expect(await stub.renewLease(roomy, asked)).toEqual({ ...once, now: once.now + 10 });
    expect((await stub.usage()).minute.count).toBe(1 + 4 + 4);
    expect((await daysOf(stub))[0]?.admitted).toBe(1 + 4);
  });

  it("remembers ids for ADMISSION_MEMORY_MS, in bounded storage the alarm empties", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    await stub.admit(policy, { want: 0, returning: [], admissionId: "m1" });
    const rows = () =>
      runInDurableObject(
        stub,
        (_i, ctx) => ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM admissions").one().n,
      );
    expect(await rows()).toBe(1);
    time.now += ADMISSION_MEMORY_MS;
    // A later request, past the memory: its own count; the old id is forgotten.
    await stub.admit(policy, { want: 0, returning: [], admissionId: "m2" });
    expect(await rows()).toBe(1);
    time.now += ADMISSION_MEMORY_MS + MINUTE_MS;
    await runDurableObjectAlarm(stub);
    expect(await rows()).toBe(0);
  });
});

describe("a retried or redirected admission is counted once", () => {
  const policy = policyWith(60, 1_000);

  it("the isolate's retry after a .retryable error from the key's object that had decided", async () => {
    const keyId = newKeyId();
    const { namespace, state } = losingAnswers<Env["QUOTA"]>(env.QUOTA, ["admit"]);
    const client = new QuotaLimiterClient(
      namespace,
      { id: keyId, region: null },
      null,
      new LeaseHolder(),
    );
    const result = await client.admit(policy, "req-1");
    expect(result.reached && result.decision.outcome).toBe("allowed");
    expect(state.calls).toBe(2);
    expect((await env.QUOTA.getByName(keyId).usage()).minute.count).toBe(1);
  });

  it("the holder's retry after the key's object decided the request it forwarded and the answer was lost", async () => {
    const keyId = newKeyId();
    // The holder reaches the key's object through the same binding the test has.
    const lossy = losingAnswers<Env["QUOTA"]>({ getByName: env.QUOTA.getByName.bind(env.QUOTA) }, [
      "admit",
    ]);
    vi.spyOn(env.QUOTA, "getByName").mockImplementation(
      lossy.namespace.getByName as typeof env.QUOTA.getByName,
    );
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    const answer = await holder.admit(keyId, policy, null, "req-h");
    expect(answer.reached && answer.decision.outcome).toBe("allowed");
    expect(lossy.state.calls).toBe(2);
    vi.mocked(env.QUOTA.getByName).mockRestore();
    await holder.giveBack(keyId);
    expect((await env.QUOTA.getByName(keyId).usage()).minute.count).toBe(1);
    expect((await daysOf(env.QUOTA.getByName(keyId)))[0]?.admitted).toBe(1);
  });

  it("the isolate's fallback to the key's object after its holder forwarded the request and the answer was lost", async () => {
    const keyId = newKeyId();
    const lossy = losingAnswers<Env["QUOTA_HOLDER"]>(env.QUOTA_HOLDER, ["admit"], {
      error: () => new Error("the location holder is unreachable"),
    });
    const client = new QuotaLimiterClient(
      env.QUOTA,
      { id: keyId, region: null },
      { holders: lossy.namespace, name: "AMS" },
      new LeaseHolder(),
    );
    const result = await client.admit(policy, "req-2");
    expect(result.reached && result.decision.outcome).toBe("allowed");
    // The holder forwarded it (with its stock) and the isolate asked the object itself: one request.
    await env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS")).giveBack(keyId);
    expect((await env.QUOTA.getByName(keyId).usage()).minute.count).toBe(1);
    expect((await daysOf(env.QUOTA.getByName(keyId)))[0]?.admitted).toBe(1);
  });

  it("the isolate's retry of its holder after it admitted the request from stock and the answer was lost", async () => {
    const keyId = newKeyId();
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    const through = (holders: Env["QUOTA_HOLDER"]) =>
      new QuotaLimiterClient(
        env.QUOTA,
        { id: keyId, region: null },
        { holders, name: "AMS" },
        new LeaseHolder(),
      );
    await through(env.QUOTA_HOLDER).admit(policy, "first"); // the holder gets its stock
    const stock = await holder.unusedPermits();
    expect(stock).toBeGreaterThan(0);
    const lossy = losingAnswers<Env["QUOTA_HOLDER"]>(env.QUOTA_HOLDER, ["admit"]);
    const result = await through(lossy.namespace).admit(policy, "second");
    expect(result.reached && result.decision.outcome).toBe("allowed");
    expect(lossy.state.calls).toBe(2);
    // One permit of the stock served it, and nothing else counted it: with the stock handed
    // back, the windows and the history count the two requests.
    await holder.giveBack(keyId);
    const object = env.QUOTA.getByName(keyId);
    expect((await object.usage()).minute.count).toBe(2);
    expect((await daysOf(object))[0]?.admitted).toBe(2);
  });

  describe("a request its holder admitted from stock, both answers lost, then decided by the key's object", () => {
    /**
     * Holds the holders' lease renewals (which report what the stock admitted) at a gate until
     * `open()`, so that the key's object decides the request before any report of it.
     */
    function holdingRenewals() {
      const { gate, open } = closedGate();
      const getByName = env.QUOTA.getByName.bind(env.QUOTA);
      vi.spyOn(env.QUOTA, "getByName").mockImplementation((name, options) => {
        const stub = getByName(name, options);
        return new Proxy(stub, {
          get: (target, prop) =>
            prop === "renewLease"
              ? async (...args: Parameters<typeof stub.renewLease>) => {
                  await gate;
                  return target.renewLease(...args);
                }
              : Reflect.get(target, prop),
        });
      });
      return async () => {
        open();
        await new Promise((resolve) => setTimeout(resolve, 20)); // the held renewals arrive
      };
    }

    /** An isolate in AMS whose holder holds stock, and that holder's calls losing 2 answers. */
    async function withStock(policy: ReturnType<typeof policyWith>, keyId: string) {
      const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
      const through = (holders: Env["QUOTA_HOLDER"]) =>
        new QuotaLimiterClient(
          env.QUOTA,
          { id: keyId, region: null },
          { holders, name: "AMS" },
          new LeaseHolder(),
        );
      await through(env.QUOTA_HOLDER).admit(policy, "first"); // the holder gets its stock
      expect(await holder.unusedPermits()).toBeGreaterThan(0);
      return { holder, through, object: env.QUOTA.getByName(keyId) };
    }

    it("the holder's report comes after the object's decision: counted once", async () => {
      const keyId = newKeyId();
      const { holder, through, object } = await withStock(policy, keyId);
      const release = holdingRenewals();
      const lossy = losingAnswers<Env["QUOTA_HOLDER"]>(env.QUOTA_HOLDER, ["admit"], { lose: 2 });
      const result = await through(lossy.namespace).admit(policy, "second");
      expect(result.reached && result.decision.outcome).toBe("allowed");
      expect(lossy.state.calls, "the holder was asked twice, then the object").toBe(2);
      await release();
      await holder.giveBack(keyId); // reports the stock's admission of "second"
      expect((await object.usage()).minute.count).toBe(2);
      expect((await daysOf(object))[0]).toMatchObject({ admitted: 2, stranded: 0 });
      // The same report again (a hand-back delivered twice) changes nothing.
      await object.returnLease({ id: "settled", unused: 0, used: 1, admissionIds: ["second"] });
      expect((await object.usage()).minute.count).toBe(2);
      expect((await daysOf(object))[0]).toMatchObject({ admitted: 2, stranded: 0 });
    });

    it("the holder's report comes before the object is asked: answered as admitted, counted once", async () => {
      const keyId = newKeyId();
      const { holder, through, object } = await withStock(policy, keyId);
      const lossy = losingAnswers<Env["QUOTA_HOLDER"]>(env.QUOTA_HOLDER, ["admit"], {
        lose: 2,
        beforeLastLoss: () => holder.giveBack(keyId),
      });
      const result = await through(lossy.namespace).admit(policy, "second");
      expect(result.reached && result.decision.outcome).toBe("allowed");
      expect((await object.usage()).minute.count).toBe(2);
      expect((await daysOf(object))[0]).toMatchObject({ admitted: 2, stranded: 0 });
    });

    it("the object refused it (its window full): the stock's permit is not billed, and comes back", async () => {
      const keyId = newKeyId();
      const small = policyWith(12, 1_000);
      const { holder, through, object } = await withStock(small, keyId);
      const { count } = (await object.usage()).minute;
      for (let i = count; i < 12; i++)
        await object.admit(small, { want: 0, returning: [], admissionId: `fill-${i}` });
      const release = holdingRenewals();
      const lossy = losingAnswers<Env["QUOTA_HOLDER"]>(env.QUOTA_HOLDER, ["admit"], { lose: 2 });
      const result = await through(lossy.namespace).admit(small, "refused");
      expect(result.reached && result.decision.outcome).toBe("rate_limited");
      await release();
      await holder.giveBack(keyId);
      // Served: "first" and the fillers; the refused request is not, whatever the stock said.
      const served = 1 + (12 - count);
      expect((await object.usage()).minute.count).toBe(served);
      expect((await daysOf(object))[0]).toMatchObject({
        admitted: served,
        refused: { rate_limited: 1 },
      });
    });
  });

  it("a cold isolate whose holder decided along with authenticating but could not answer: the Worker's own decision is the same one", async () => {
    const { id, key } = await issueKey("free");
    forgetKey(id);
    const lossy = losingAnswers<Env["QUOTA_HOLDER"]>(env.QUOTA_HOLDER, ["authenticateAndAdmit"], {
      error: () => new Error("the location holder is unreachable"),
    });
    const res = await callWith(
      { QUOTA_HOLDER: lossy.namespace },
      new Request(`${BASE}/v1/pets?limit=1`, {
        headers: auth(key, { "CF-Connecting-IP": "203.0.113.7" }),
        cf: { colo: "AMS" },
      } as RequestInit),
    );
    expect(res.status).toBe(200);
    expect(lossy.state.lost).toBe(1);
    await env.QUOTA_HOLDER.getByName(holderName(id, "AMS")).giveBack(id);
    const object = env.QUOTA.getByName(id);
    expect((await object.usage()).minute.count).toBe(1);
    expect((await daysOf(object))[0]?.admitted).toBe(1);
  });
});

describe("an admission id is decided only within its lifetime, and remembered as long as it can be asked or reported", () => {
  const policy = policyWith(60, 1_000);

  it("ties the numbers: memory covers a lifetime and the clock tolerance, and ids say when they were made", () => {
    expect(ADMISSION_MEMORY_MS).toBe(ADMISSION_ID_LIFETIME_MS + ADMISSION_CLOCK_TOLERANCE_MS);
    const id = newAdmissionId(T0);
    expect(admissionIdMadeAt(id)).toBe(T0);
    expect(admissionIdMadeAt("a1"), "an id of an earlier release says nothing").toBeNull();
    expect(admissionIdLive(id, T0 + ADMISSION_ID_LIFETIME_MS - 1)).toBe(true);
    expect(admissionIdLive(id, T0 + ADMISSION_ID_LIFETIME_MS)).toBe(false);
    expect(admissionIdLive(id, T0 - ADMISSION_CLOCK_TOLERANCE_MS + 1)).toBe(true);
    expect(admissionIdLive(id, T0 - ADMISSION_CLOCK_TOLERANCE_MS)).toBe(false);
    expect(admissionIdLive("a1", T0 + 100 * ADMISSION_MEMORY_MS)).toBe(true);
  });

  it("a retry held on its way past the memory is not decided again: answered stale, counted once", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    const request = { want: 0, returning: [], admissionId: newAdmissionId(time.now) };
    const first = await stub.admit(policy, request);
    expect(first.outcome).toBe("allowed");
    time.now += ADMISSION_MEMORY_MS + 1_000;
    // Another request meanwhile: the object forgets the ids past its memory.
    await stub.admit(policy, { want: 0, returning: [], admissionId: newAdmissionId(time.now) });
    const held = await stub.admit(policy, request);
    expect(held.outcome, "not decided: it may have been, and forgotten").toBe("stale");
    expect((await stub.usage()).day.count).toBe(2);
    expect((await daysOf(stub))[0]?.admitted).toBe(2);
  });

  it("a location holder asked with an id past its lifetime admits nothing from its stock", async () => {
    const keyId = newKeyId();
    const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    const first = await holder.admit(keyId, policy, null, newAdmissionId(time.now));
    expect(first.reached && first.decision.outcome).toBe("allowed");
    const stock = await holder.unusedPermits();
    expect(stock, "the holder holds stock").toBeGreaterThan(0);
    time.now += 1_000;
    const late = await holder.admit(
      keyId,
      policy,
      null,
      newAdmissionId(time.now - ADMISSION_ID_LIFETIME_MS),
    );
    expect(late.reached && late.decision.outcome).toBe("stale");
    expect(late.reached && late.fromStock).toBe(false);
    expect(await holder.unusedPermits(), "its stock is untouched").toBe(stock);
    await holder.giveBack(keyId);
    const object = env.QUOTA.getByName(keyId);
    expect((await object.usage()).day.count).toBe(1);
    expect((await daysOf(object))[0]?.admitted).toBe(1);
  });

  it("a stock's report of an id arriving past the memory, its lease still out, finds the object's own decision", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    time.now = T0 + 500; // a minute's start: a stock for the minute lives to its end
    const grant = await stub.admit(
      policy,
      { want: 2, returning: [], admissionId: newAdmissionId(time.now) },
      "holder@AMS",
    );
    const stock = grant.lease!;
    expect(stock.expiresAt, "a stock for the minute").toBe(T0 + MINUTE_MS);
    // The holder admits X from its stock, its answers are lost, and the isolate's fallback has
    // the key's object decide X too.
    time.now += 1_000;
    const x = newAdmissionId(time.now);
    expect((await stub.admit(policy, { want: 0, returning: [], admissionId: x })).outcome).toBe(
      "allowed",
    );
    // Past the memory (the stock's lease is out until 30 s after its minute): another request,
    // then the stock's hand-back reporting X.
    time.now += ADMISSION_MEMORY_MS + 1_000;
    await stub.admit(policy, { want: 0, returning: [], admissionId: newAdmissionId(time.now) });
    await stub.returnLease({ id: stock.id, unused: 1, used: 1, admissionIds: [x] });
    // The grant's request, X once, the later request.
    const [today] = await daysOf(stub);
    expect(today?.admitted).toBe(3);
    expect((await stub.usage()).day.count).toBe(3);
  });
});
