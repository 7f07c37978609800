// The Worker's side of a location holder (src/objects/quota-holder-client.ts): what it asks the
// key's holder in the request's location, and how it reads the answers. Pure, with a holder that
// answers as each test says and records what it was asked.
import { describe, expect, it } from "vitest";
import type { KeyMatch } from "../src/db/keys";
import type { HolderAnswer, HolderAuthentication } from "../src/objects/quota-holder";
import {
  admitInLocationOrThrow,
  authenticateAndAdmitInLocation,
  authenticateInLocation,
  HolderWithoutDecision,
  handBackLocationStock,
  type RequestLocation,
} from "../src/objects/quota-holder-client";
import type { KeyDecision } from "../src/quota/windows";
import { policyWith, T0 } from "./helpers";

const policy = policyWith(60, 1_000);
const decision: KeyDecision = { outcome: "allowed", windows: [], now: T0, policyVersion: 1 };
const match = { record: { id: "k" }, secret: { role: "primary" } } as unknown as KeyMatch;
const notReached: HolderAnswer = { reached: false, overloaded: true, refusal: null };

/** A location whose holders answer with `holder`'s methods, recording each call and its holder. */
function locationWith(holder: Record<string, (...args: unknown[]) => Promise<unknown>>) {
  const calls: { name: string; method: string; args: unknown[] }[] = [];
  const holders = {
    getByName: (name: string) =>
      new Proxy(
        {},
        {
          get:
            (_target, method: string) =>
            (...args: unknown[]) => {
              calls.push({ name, method, args });
              return holder[method]!(...args);
            },
        },
      ),
  };
  const location = { holders, name: "LHR" } as unknown as RequestLocation;
  return { location, calls };
}

describe("authenticating at the key's location holder", () => {
  it("asks the holder named for the key and the request's location, and hands on its copy's age", async () => {
    const { location, calls } = locationWith({
      authenticate: async () => ({ outcome: "found", match, answer: null, copyAgeMs: 1_234 }),
    });
    expect(await authenticateInLocation(location, "k", "h")).toEqual({
      outcome: "found",
      match,
      admission: null,
      copyAgeMs: 1_234,
    });
    expect(calls).toEqual([{ name: "k@LHR", method: "authenticate", args: ["k", "h"] }]);
  });

  it("an answer that did not read the key (D1 failed at the holder) is passed on as such", async () => {
    const { location } = locationWith({
      authenticate: async (): Promise<HolderAuthentication> => ({ outcome: "unread" }),
    });
    expect(await authenticateInLocation(location, "k", "h")).toEqual({ outcome: "unread" });
  });

  it("with the decision: sends the admission id, and passes a holder's no-decision on", async () => {
    const { location, calls } = locationWith({
      authenticateAndAdmit: async () => ({ outcome: "found", match, answer: notReached }),
    });
    expect(await authenticateAndAdmitInLocation(location, "k", "h", "id-1")).toEqual({
      outcome: "found",
      match,
      admission: notReached,
      copyAgeMs: 0,
    });
    expect(calls[0]?.args).toEqual(["k", "h", "id-1"]);
  });
});

describe("a request decided by the key's location holder", () => {
  it("with no lease wanted: asked with its region and admission id, decided", async () => {
    const { location, calls } = locationWith({
      admit: async () => ({ reached: true, decision, fromStock: true }),
    });
    const request = { want: 0, returning: [], admissionId: "id-2" };
    expect(await admitInLocationOrThrow(location, "k", "weur", policy, request)).toEqual({
      ...decision,
      lease: null,
    });
    expect(calls).toEqual([
      { name: "k@LHR", method: "admit", args: ["k", policy, "weur", "id-2"] },
    ]);
  });

  it("handing leases back (no lease wanted): goes through admitForIsolate with them and its region", async () => {
    const { location, calls } = locationWith({
      admitForIsolate: async () => ({ ...decision, lease: null }),
    });
    const request = { want: 0, returning: [{ id: "l1", unused: 2, used: 1 }] };
    await admitInLocationOrThrow(location, "k", "weur", policy, request);
    expect(calls).toEqual([
      { name: "k@LHR", method: "admitForIsolate", args: ["k", policy, request, "weur"] },
    ]);
  });

  it("not decided by the holder: throws why, overloaded or not", async () => {
    const { location } = locationWith({ admit: async () => notReached });
    const request = { want: 0, returning: [] };
    const thrown = await admitInLocationOrThrow(location, "k", null, policy, request).catch(
      (err: unknown) => err,
    );
    expect(thrown).toBeInstanceOf(HolderWithoutDecision);
    expect((thrown as HolderWithoutDecision).overloaded).toBe(true);
  });
});

describe("handing a location's stock back", () => {
  it("returns once the holder has", async () => {
    let handedBack = false;
    const { location, calls } = locationWith({
      giveBack: async () => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        handedBack = true;
      },
    });
    await handBackLocationStock(location, "k");
    expect(handedBack).toBe(true);
    expect(calls).toEqual([{ name: "k@LHR", method: "giveBack", args: ["k"] }]);
  });
});
