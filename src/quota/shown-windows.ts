/**
 * Display state: the windows a lease holder shows in a response's rate-limit headers. A request
 * admitted from a lease is shown as if the key's object had decided it: the object's windows at
 * the last contact, minus what the holder admitted since, and never more remaining than shown
 * before within the same window.
 */
import type { KeyDecision, WindowStatus } from "./windows";

/**
 * The windows an isolate reports for a request it admitted from its lease: the object's
 * remaining at the last contact minus what this isolate admitted since.
 */
export function windowsAfterLocalAdmissions(
  atContact: WindowStatus[],
  admittedSince: number,
): WindowStatus[] {
  return atContact.map((w) => ({ ...w, remaining: Math.max(0, w.remaining - admittedSince) }));
}

/**
 * Keeps a window's remaining from going up within the window in one isolate's responses: another
 * isolate handing back unused permits raises the object's remaining, which would otherwise show
 * as a jump. A new window or a new limit (a plan change) starts afresh.
 */
export function neverAbove(windows: WindowStatus[], shown: WindowStatus[]): WindowStatus[] {
  return windows.map((w) => {
    const before = shown.find(
      (s) => s.name === w.name && s.resetAt === w.resetAt && s.limit === w.limit,
    );
    return before && before.remaining < w.remaining ? { ...w, remaining: before.remaining } : w;
  });
}

/** One holder's display state for one key. */
export class ShownWindows {
  /** The object's windows at the last contact, and what this holder admitted since. */
  #atContact: WindowStatus[] = [];
  #admittedSince = 0;
  /** The windows as last shown in a response, so remaining never goes up within a window. */
  #shown: WindowStatus[] = [];

  /** The object's windows at the last contact. */
  get atContact(): WindowStatus[] {
    return this.#atContact;
  }

  /** Requests admitted here from a lease since the last contact. */
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

  /**
   * A renewal's answer, given what the holder had when it sent it (the windows at that contact,
   * the permits it held, the requests it had admitted since).
   */
  renewalAnswered(
    windows: WindowStatus[],
    sent: { windows: WindowStatus[]; holding: number; admitted: number },
  ): void {
    // The object's windows, with the permits the isolate held at the time counted as its own
    // room, minus what it admitted since: the same reading as after any other contact. Only
    // when no window rolled over meanwhile: the held permits and those admissions belong to the
    // old window, so a new window is shown as the object has it.
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
