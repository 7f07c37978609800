// What an admission or renewal asked again answers once the lease it granted is no longer out:
// the repeat gets the same decision, but never a lease the object has already taken back (its
// permits are back in the windows, or settled), or the caller would admit from them twice.
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { mockClock, policyWith, T0 } from "./helpers";

mockClock(T0);
let seq = 0;
const newKeyId = () => `repeats_after_settling_${++seq}`;

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});
afterEach(() => vi.restoreAllMocks());

describe("an admission asked again after its lease was handed back", () => {
  const roomy = policyWith(100, 1_000);

  it("gets the same decision without the lease: its permits were credited back already", async () => {
    const stub = env.QUOTA.getByName(newKeyId());
    const first = await stub.admit(roomy, { want: 5, returning: [], admissionId: "g1" });
    expect(first.outcome).toBe("allowed");
    expect(first.lease?.permits).toBe(5);
    // The lease comes back whole with the next request: 1 + 1 counted.
    await stub.admit(roomy, {
      want: 0,
      returning: [{ id: first.lease!.id, unused: 5, used: 0 }],
      admissionId: "g2",
    });
    expect((await stub.usage()).minute.count).toBe(2);
    const again = await stub.admit(roomy, { want: 5, returning: [], admissionId: "g1" });
    expect(again.outcome).toBe("allowed");
    expect(again.lease).toBeNull();
    expect((await stub.usage()).minute.count).toBe(2);
  });
});
