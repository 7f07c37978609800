import { MINUTE_MS } from "../lib/clock";
import { logFailure } from "../lib/log";

/** How soon the object tries again when D1 did not take a write (a ban, a finished day). */
export const D1_RETRY_MS = 5 * MINUTE_MS;

/** An object's one alarm, shared by all it holds for later: the earliest asked for wins. */
export class AlarmSchedule {
  /** The earliest alarm asked for that storage failed to set (see wakeNoLaterThan). */
  #owed: number | null = null;
  /** The last alarm change asked for (see noLaterThan). */
  #change: Promise<void> = Promise.resolve();

  constructor(private readonly storage: DurableObjectStorage) {}

  /** Moves the alarm to `at` if not set earlier: one change at a time, each reading the last's. */
  noLaterThan(at: number): Promise<void> {
    const change = this.#change.then(async () => {
      const current = await this.storage.getAlarm();
      if (current === null || current > at) await this.storage.setAlarm(at);
    });
    this.#change = change.catch(() => undefined);
    return change;
  }

  /** As noLaterThan, not waiting; a failure is logged and asked for again (askOwed). */
  wakeNoLaterThan(at: number, failure: string): void {
    this.noLaterThan(at).catch((err: unknown) => {
      this.#owed = Math.min(at, this.#owed ?? at);
      logFailure("error", failure, err);
    });
  }

  askOwed(): void {
    const owed = this.#owed;
    if (owed === null) return;
    this.#owed = null;
    this.wakeNoLaterThan(owed, "could not schedule an alarm owed since an earlier failure");
  }
}
