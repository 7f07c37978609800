// Call coordination (src/quota/call-coordination.ts): a lease holder's calls in flight.
import { describe, expect, it, vi } from "vitest";
import { CallsInFlight, withDeadline } from "../src/quota/call-coordination";

/** A promise and the functions that settle it. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe("CallsInFlight", () => {
  it("holds an exclusive call until it settles, rejected or not", async () => {
    const calls = new CallsInFlight();
    expect(calls.idle).toBe(true);
    const grant = deferred<number>();
    const running = calls.exclusively(grant.promise);
    expect(calls.exclusive).toBe(running);
    expect(calls.idle).toBe(false);
    grant.resolve(3);
    expect(await running).toBe(3);
    expect(calls.exclusive).toBeNull();
    const failing = deferred();
    const rejected = calls.exclusively(failing.promise);
    failing.reject(new Error("unreachable"));
    await expect(rejected).rejects.toThrow("unreachable");
    expect(calls.exclusive).toBeNull();
    expect(calls.idle).toBe(true);
  });

  it("counts requests decided one by one, oldest first, until each settles", async () => {
    const calls = new CallsInFlight();
    const first = deferred();
    const second = deferred();
    const a = calls.plain(() => first.promise);
    const b = calls.plain(() => second.promise);
    expect(calls.plainInFlight).toBe(2);
    expect(calls.firstPlain()).toBe(a);
    expect(calls.idle).toBe(false);
    first.resolve();
    await a;
    expect(calls.plainInFlight).toBe(1);
    expect(calls.firstPlain()).toBe(b);
    second.reject(new Error("overloaded"));
    await expect(b).rejects.toThrow("overloaded");
    expect(calls.plainInFlight).toBe(0);
    expect(calls.firstPlain()).toBeUndefined();
    expect(calls.idle).toBe(true);
  });

  it("leaseCallsSettled waits for the exclusive call and the renewal, not for plain calls", async () => {
    const calls = new CallsInFlight();
    const plain = deferred();
    void calls.plain(() => plain.promise);
    await calls.leaseCallsSettled(); // a plain call in flight: returns at once
    const renewal = deferred<boolean>();
    const grant = deferred();
    void calls.asRenewal(renewal.promise).catch(() => undefined);
    void calls.exclusively(grant.promise);
    expect(calls.renewal).not.toBeNull();
    let settled = false;
    const waiting = calls.leaseCallsSettled().then(() => {
      settled = true;
    });
    grant.resolve();
    await new Promise((resolve) => setTimeout(resolve, 0)); // every settled call handled
    expect(calls.exclusive).toBeNull();
    expect(settled).toBe(false); // the renewal is still in flight
    renewal.reject(new Error("lost"));
    await waiting;
    expect(settled).toBe(true);
    expect(calls.renewal).toBeNull();
    plain.resolve();
  });
  it("leaseCallsSettled waits for an exclusive call alone, and for a renewal alone", async () => {
    for (const start of ["exclusively", "asRenewal"] as const) {
      const calls = new CallsInFlight();
      const call = deferred();
      void calls[start](call.promise);
      let settled = false;
      const waiting = calls.leaseCallsSettled().then(() => {
        settled = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(settled, start).toBe(false);
      call.resolve();
      await waiting;
      expect(calls.idle, start).toBe(true);
    }
  });
});

describe("withDeadline", () => {
  it("passes an answer through in time, and rejects once the deadline passes", async () => {
    expect(await withDeadline(Promise.resolve(7), 50)).toBe(7);
    await expect(withDeadline(new Promise(() => {}), 20)).rejects.toThrow("no answer within 20 ms");
  });

  it("leaves no timer armed once the answer came (a renewal's deadline is a lease's lifetime)", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      expect(await withDeadline(Promise.resolve(7), 5_000)).toBe(7);
      await expect(withDeadline(Promise.reject(new Error("lost")), 5_000)).rejects.toThrow("lost");
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
