import type { KeyDecision, WindowStatus } from "./windows";

/** The object's windows at the last contact, minus what the holder admitted since from a lease. */
export function windowsAfterLocalAdmissions(
  atContact: WindowStatus[],
  admittedSince: number,
): WindowStatus[] {
  return atContact.map((w) => ({ ...w, remaining: Math.max(0, w.remaining - admittedSince) }));
}

/** Remaining never goes up in one holder's answers (another's hand-back would show as a jump). */
export function neverAbove(windows: WindowStatus[], shown: WindowStatus[]): WindowStatus[] {
  return windows.map((w) => {
    const before = shown.find(
      (s) => s.name === w.name && s.resetAt === w.resetAt && s.limit === w.limit,
    );
    return before && before.remaining < w.remaining ? { ...w, remaining: before.remaining } : w;
  });
}

/** The windows a lease holder shows in rate-limit headers, as if the key's object had decided. */
export class ShownWindows {
  #atContact: WindowStatus[] = [];
  #admittedSince = 0;
  #shown: WindowStatus[] = [];

  get atContact(): WindowStatus[] {
    return this.#atContact;
  }

  get admittedSinceContact(): number {
    return this.#admittedSince;
  }

  /** When the minute window seen at the last contact ends (Infinity: none seen yet). */
  get minuteEnd(): number {
    return this.#atContact.find((w) => w.name === "minute")?.resetAt ?? Infinity;
  }

  /** A contact with the object (a decision, or a refill's answer): its windows, nothing since. */
  contact(windows: WindowStatus[]): void {
    this.#atContact = windows;
    this.#admittedSince = 0;
  }

  /** One more request admitted here from a lease: the windows it reports (before `show`). */
  admitLocally(): WindowStatus[] {
    this.#admittedSince++;
    return windowsAfterLocalAdmissions(this.#atContact, this.#admittedSince);
  }

  /** A renewal's answer, given what the holder had when it sent it. */
  renewalAnswered(
    windows: WindowStatus[],
    sent: { windows: WindowStatus[]; holding: number; admitted: number },
  ): void {
    // The permits held when it was sent count as the holder's own room; unless a window rolled
    // over meanwhile (they belong to the old one): then the object's windows as they are.
    const sameWindows = windows.every((w) =>
      sent.windows.some((a) => a.name === w.name && a.resetAt === w.resetAt),
    );
    if (sameWindows) {
      this.#atContact = windows.map((w) => ({
        ...w,
        remaining: Math.min(w.limit, w.remaining + sent.holding),
      }));
      this.#admittedSince = Math.max(0, this.#admittedSince - sent.admitted);
    } else {
      this.contact(windows);
    }
  }

  /** `decision` as shown in a response: no window's remaining above what was shown before. */
  show(decision: KeyDecision): KeyDecision {
    const windows = neverAbove(decision.windows, this.#shown);
    this.#shown = windows;
    return { ...decision, windows };
  }
}
