// A location holder's standing permits kept in its own storage (src/objects/holder-standing-memory.ts):
// what is written, and the alarm that hands them back for a holder evicted before their end
// (docs/quotas.md: "An alarm 1.25 s after the last one's minute ends hands them back").
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MINUTE_MS } from "../src/lib/clock";
import { HeldKeyRecord } from "../src/objects/holder-key-record";
import {
  HolderStandingMemory,
  RESTORED_STANDING_MARGIN_MS,
} from "../src/objects/holder-standing-memory";
import { holderName } from "../src/objects/quota-holder";
import { GIVE_BACK_GRACE_MS, QUIET_STOCK } from "../src/quota/lease";
import { LeaseHolder } from "../src/quota/lease-holder";
import type { HeldStanding } from "../src/quota/standing-stock";
import { alarmOf, mockClock, T0 } from "./helpers";

const time = mockClock(T0);
/** The docs' 1.25 s: the alarm after the last standing permit's minute ends. */
const ALARM_AFTER_END_MS = 1_250;
const MINUTE = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
let seq = 0;

/** A standing permit for the minute starting at `minuteStart`, usable all of it. */
const permitFor = (minuteStart: number): HeldStanding => ({
  id: `s${minuteStart}`,
  left: 2,
  used: 0,
  from: minuteStart,
  until: minuteStart + MINUTE_MS,
  minuteStart,
  policyVersion: 1,
  admissionIds: [],
});

/** A lease holder holding standing permits for the minutes starting at `minuteStarts`. */
function leasesHolding(...minuteStarts: number[]): LeaseHolder {
  const leases = new LeaseHolder({ stock: QUIET_STOCK });
  leases.restoreStanding({ standing: minuteStarts.map(permitFor), lastArrival: null, gapMs: 0 }, 0);
  return leases;
}

/** Runs `body` with the storage of a location holder of its own. */
function inHolderStorage(
  body: (storage: DurableObjectStorage, keyId: string) => Promise<void>,
): Promise<void> {
  const keyId = `memory_${++seq}`;
  const stub = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  return runInDurableObject(stub, (_holder, state) => body(state.storage, keyId));
}

describe("a location holder's standing permits in its storage", () => {
  it("are written with their key, and the alarm is set 1.25 s after the last one's minute ends", async () => {
    await inHolderStorage(async (storage, keyId) => {
      const leases = leasesHolding(MINUTE, MINUTE + MINUTE_MS);
      const memory = new HolderStandingMemory(storage, leases, new HeldKeyRecord());
      memory.keep({ keyId, region: null });
      const end = MINUTE + 2 * MINUTE_MS;
      expect(leases.standingUntil).toBe(end);
      expect(memory.kept()).toMatchObject({ keyId, region: null, standing: [{}, {}] });
      expect(await storage.getAlarm()).toBe(end + ALARM_AFTER_END_MS);
      expect(memory.handBackDueAt, "the in-memory hand-back, before the alarm").toBe(
        end + GIVE_BACK_GRACE_MS,
      );
    });
  });

  it("ending sooner than those written (by more than the restored margin), move the alarm earlier", async () => {
    await inHolderStorage(async (storage, keyId) => {
      const owner = { keyId, region: null };
      const later = new HolderStandingMemory(
        storage,
        leasesHolding(MINUTE, MINUTE + 3 * MINUTE_MS),
        new HeldKeyRecord(),
      );
      later.keep(owner);
      expect(await storage.getAlarm()).toBe(MINUTE + 4 * MINUTE_MS + ALARM_AFTER_END_MS);
      // The same storage, the permits now held ending two minutes sooner (later ones retired).
      const sooner = new HolderStandingMemory(storage, leasesHolding(MINUTE), new HeldKeyRecord());
      sooner.kept();
      sooner.keep(owner);
      expect(await storage.getAlarm()).toBe(MINUTE + MINUTE_MS + ALARM_AFTER_END_MS);
    });
  });

  it("none held any more: deleted, and their alarm with them", async () => {
    await inHolderStorage(async (storage, keyId) => {
      const owner = { keyId, region: null };
      const leases = leasesHolding(MINUTE);
      const memory = new HolderStandingMemory(storage, leases, new HeldKeyRecord());
      memory.keep(owner);
      expect(await storage.getAlarm()).not.toBeNull();
      leases.restoreStanding({ standing: [], lastArrival: null, gapMs: 0 }, 0);
      expect(leases.standingUntil).toBe(0);
      memory.keep(owner);
      expect(memory.kept()).toBeNull();
      expect(await storage.getAlarm()).toBeNull();
    });
  });

  it("kept by a holder evicted, whose alarm fires before their hand-back is due: the alarm is set again, for the same time", async () => {
    const keyId = `memory_${++seq}`;
    const stub = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
    const end = MINUTE + 2 * MINUTE_MS;
    await runInDurableObject(stub, async (_holder, state) => {
      const memory = new HolderStandingMemory(
        state.storage,
        leasesHolding(MINUTE, MINUTE + MINUTE_MS),
        new HeldKeyRecord(),
      );
      memory.keep({ keyId, region: null });
    });
    await evictDurableObject(stub);
    // Constructed again, the holder holds them the margin less at both ends.
    const alarmAt = end - RESTORED_STANDING_MARGIN_MS + ALARM_AFTER_END_MS;
    time.now = MINUTE + MINUTE_MS;
    expect(await alarmOf(stub)).toBe(end + ALARM_AFTER_END_MS);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await alarmOf(stub), "set again after it fired").toBe(alarmAt);
    expect(await stub.unusedPermits(), "nothing handed back").toBe(4);
  });
});
