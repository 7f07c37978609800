// A request on a copy of the key older than its object's policy is answered `stale` and counted
// nowhere, but the leases it hands back are still taken back: their unused permits return to the
// windows, as they would with any other answer.
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { mockClock, policyWith, T0 } from "./helpers";

mockClock(T0);

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(() => undefined);
});
afterEach(() => vi.restoreAllMocks());

it("a `stale` answer still credits back the leases the request returned", async () => {
  const stub = env.QUOTA.getByName("stale_takes_back_1");
  const before = policyWith(100, 1_000, { version: 1 });
  const now = policyWith(100, 1_000, { version: 2 });
  const first = await stub.admit(before, { want: 5, returning: [], admissionId: "a" });
  expect(first.lease?.permits).toBe(5);
  await stub.admit(now, { want: 0, returning: [], admissionId: "b" }); // the change, elsewhere
  expect((await stub.usage()).minute.count).toBe(1 + 5 + 1);
  const stale = await stub.admit(before, {
    want: 0,
    returning: [{ id: first.lease!.id, unused: 5, used: 0 }],
    admissionId: "c",
  });
  expect(stale.outcome).toBe("stale");
  expect((await stub.usage()).minute.count).toBe(2);
});
