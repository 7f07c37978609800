// An admission id says when it was made only in the shape newAdmissionId gives it
// (src/quota/lease-messages.ts): the time in base 36, a dot, a UUID, and nothing around them.
import { describe, expect, it } from "vitest";
import { admissionIdLive, admissionIdMadeAt, newAdmissionId } from "../src/quota/lease-messages";
import { T0 } from "./helpers";

describe("an admission id's time", () => {
  const id = newAdmissionId(T0);

  it("is read from the whole id only: anything before its time or after its UUID, and it says nothing", () => {
    expect(admissionIdMadeAt(id)).toBe(T0);
    expect(admissionIdMadeAt(`-${id}`)).toBeNull();
    expect(
      admissionIdMadeAt(`${"z".repeat(13)}.${id.split(".")[1]}`),
      "13 digits of time",
    ).toBeNull();
    expect(admissionIdMadeAt(`${id}0`)).toBeNull();
    expect(admissionIdMadeAt(`${id}.${id}`)).toBeNull();
  });

  it("an id that says nothing is live at any time, as an earlier release's", () => {
    expect(admissionIdLive(`-${id}`, T0 + 10 * 60_000)).toBe(true);
    expect(admissionIdLive(`${id}0`, T0 + 10 * 60_000)).toBe(true);
    expect(admissionIdLive(id, T0 + 10 * 60_000)).toBe(false);
  });
});
