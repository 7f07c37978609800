// The key's object counting once each request a location holder reports it admitted from its
// stock (src/objects/admission-memory.ts, countOnceFromStock), by admission id: decided at the
// object too, in a later minute than the stock's; or reported first and asked after.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { newAdmissionId } from "../src/quota/lease-messages";
import { mockClock, policyWith, T0 } from "./helpers";

const time = mockClock(T0);
const policy = policyWith(60, 1_000, { version: 3 });
let seq = 0;
const newLimiter = () => env.QUOTA.getByName(`admission_memory_${++seq}`);

describe("a request a location holder reports it admitted from its stock", () => {
  it("decided at the key's object too, in the minute after the stock's: the object's own count comes off that minute", async () => {
    const stub = newLimiter();
    time.now = T0 + 50_000;
    const granted = await stub.admit(policy, { want: 5, returning: [] }, "k@AMS");
    const lease = granted.lease!;
    expect(lease).not.toBeNull();
    // Admitted from that stock, its answer lost: the isolate asks the key's object, a minute on.
    const id = newAdmissionId(time.now);
    time.now = T0 + MINUTE_MS + 5_000;
    const retried = await stub.admit(policy, { want: 0, returning: [], admissionId: id });
    expect(retried.outcome).toBe("allowed");
    expect((await stub.usage()).minute.count).toBe(1);
    // The stock's hand-back reports it: counted once, in the stock's minute.
    await stub.returnLease({ id: lease.id, unused: 4, used: 1, admissionIds: [id] });
    expect((await stub.usage()).minute.count, "the object's own count came off").toBe(0);
  });

  it("reported first, then asked with its id: answered admitted under the key's policy", async () => {
    const stub = newLimiter();
    time.now = T0 + 10_000;
    const granted = await stub.admit(policy, { want: 5, returning: [] }, "k@AMS");
    const id = newAdmissionId(time.now);
    await stub.returnLease({ id: granted.lease!.id, unused: 4, used: 1, admissionIds: [id] });
    const counted = (await stub.usage()).minute.count;
    time.now += 1_000;
    const asked = await stub.admit(policy, { want: 0, returning: [], admissionId: id });
    expect(asked).toMatchObject({ outcome: "allowed", policyVersion: policy.version });
    expect(asked.windows.find((w) => w.name === "minute")).toMatchObject({
      limit: 60,
      remaining: 60 - counted,
    });
    expect((await stub.usage()).minute.count, "counted nowhere else").toBe(counted);
  });
});
