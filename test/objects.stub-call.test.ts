import { describe, expect, it } from "vitest";
import {
  callWithOneRetry,
  isOverloaded,
  ObjectCannotOpenError,
  openOrThrow,
  persistentFailureOf,
} from "../src/objects/stub-call";

/** An error as the Durable Objects runtime marks it. */
const marked = (marks: { retryable?: boolean; overloaded?: boolean; remote?: boolean }) =>
  Object.assign(new Error("Durable Object error"), marks);

/** A stub factory that counts the stubs it made, and a call that fails with `errors` in turn. */
function scripted(errors: Error[]) {
  let stubs = 0;
  let calls = 0;
  const stubFor = () => ++stubs;
  const call = async (stub: number) => {
    const err = errors[calls++];
    if (err) throw err;
    return `answered by stub ${stub}`;
  };
  return { stubFor, call, counts: () => ({ stubs, calls }) };
}

describe("callWithOneRetry", () => {
  it("a success is returned after one call on one stub", async () => {
    const s = scripted([]);
    expect(await callWithOneRetry(s.stubFor, s.call)).toBe("answered by stub 1");
    expect(s.counts()).toEqual({ stubs: 1, calls: 1 });
  });

  it("a .retryable error is retried once, on a fresh stub", async () => {
    const s = scripted([marked({ retryable: true })]);
    expect(await callWithOneRetry(s.stubFor, s.call)).toBe("answered by stub 2");
    expect(s.counts()).toEqual({ stubs: 2, calls: 2 });
  });

  it("a second .retryable error is thrown: one retry, not a loop", async () => {
    const second = marked({ retryable: true });
    const s = scripted([marked({ retryable: true }), second]);
    await expect(callWithOneRetry(s.stubFor, s.call)).rejects.toBe(second);
    expect(s.counts()).toEqual({ stubs: 2, calls: 2 });
  });

  it.each([
    ["overloaded (retrying only adds load)", { overloaded: true, retryable: true }],
    ["overloaded", { overloaded: true }],
    ["thrown by the object's own code", { remote: true }],
    ["unmarked", {}],
  ])("an error %s is not retried", async (_, marks) => {
    const err = marked(marks);
    const s = scripted([err]);
    await expect(callWithOneRetry(s.stubFor, s.call)).rejects.toBe(err);
    expect(s.counts()).toEqual({ stubs: 1, calls: 1 });
  });

  it("isOverloaded reads the runtime's mark, and nothing else", () => {
    expect(isOverloaded(marked({ overloaded: true }))).toBe(true);
    expect(isOverloaded(marked({ retryable: true }))).toBe(false);
    expect(isOverloaded(new Error("Durable Object is overloaded"))).toBe(false);
    expect(isOverloaded("overloaded")).toBe(false);
    expect(isOverloaded(null)).toBe(false);
  });
});

describe("persistentFailureOf (a failure that repeats on every call, not an outage)", () => {
  it.each([
    ["thrown by the object's own code", { remote: true }],
    ["thrown by the object's own code and marked retryable", { remote: true, retryable: true }],
    ["retryable (a dropped connection, a reset object)", { retryable: true }],
    ["overloaded", { overloaded: true, remote: true }],
    ["unmarked (the network, the runtime)", {}],
  ])("an error %s", (what, marks) => {
    const persistent = what === "thrown by the object's own code";
    expect(persistentFailureOf(marked(marks))).toBe(persistent ? "Durable Object error" : null);
  });

  it("an object that cannot open, as its caller sees it (the message alone crosses the call)", () => {
    const thrown = new ObjectCannotOpenError(
      "its stored schema version 11 is newer than this code reads (10)",
    );
    const seen = Object.assign(new Error(thrown.message), { durableObjectReset: true });
    expect(persistentFailureOf(seen)).toBe(thrown.message);
    expect(persistentFailureOf(Object.assign(new Error(thrown.message), { retryable: true }))).toBe(
      thrown.message,
    );
  });
});

describe("openOrThrow", () => {
  it("turns whatever fails while an object opens into an error its callers recognise", async () => {
    const failing = openOrThrow(() => {
      throw new Error("BAN_MINUTES is not a number");
    });
    await expect(failing).rejects.toThrow(ObjectCannotOpenError);
    await expect(failing).rejects.toThrow(
      /^object cannot open: Error: BAN_MINUTES is not a number$/,
    );
    const tooNew = new ObjectCannotOpenError("schema");
    await expect(openOrThrow(() => Promise.reject(tooNew))).rejects.toBe(tooNew);
    await expect(openOrThrow(() => undefined)).resolves.toBeUndefined();
  });
});
