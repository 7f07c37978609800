import { MINUTE_MS } from "../lib/clock";
import { idsOf } from "./lease-in-hand";
import type { ReturnedLease, StandingPermit } from "./lease-messages";
import type { WindowStatus } from "./windows";

/** A standing permit as a location holder holds it, usable from `from` until `until` by its own clock. */
export interface HeldStanding {
  id: string;
  left: number;
  used: number;
  from: number;
  until: number;
  /** The minute it was counted in, by the key's object's clock (for the windows shown). */
  minuteStart: number;
  policyVersion: number;
  admissionIds: string[];
}

/**
 * What a location holder keeps across an eviction (see QuotaHolder, LeaseHolder.standingMemory):
 * its standing permits, and when the key last arrived there and the gap before, which size and
 * time its next ask for them.
 */
export interface StandingMemory {
  standing: HeldStanding[];
  lastArrival: number | null;
  gapMs: number;
  /**
   * The key's windows at the holder's last contact: a request answered from a kept permit shows
   * them (the response's quota headers are built from them). Absent in what was kept before they
   * were: such permits are not used (the request goes to the key's object).
   */
  windows?: WindowStatus[];
}

/**
 * A location holder's standing permits (quota/standing.ts), each usable only within its minute.
 * The key's object counts a minute's permits in that minute's window as it starts, so a holder
 * must not use one before that minute has started by the object's clock, nor after it ended:
 * the object answered at its `now`, which this holder's clock read somewhere between asking
 * (`sentAt`) and getting the answer (`receivedAt`), so a permit is used only from `receivedAt`
 * plus the time to its minute's start, until `sentAt` plus the time to its minute's end.
 * What it admitted goes back with the holder's next call to the key's object (reports), not in
 * a call of its own.
 */
export class StandingStock {
  #held: HeldStanding[] = [];
  /**
   * Called, synchronously, after every change to what is held: a grant kept, a permit taken,
   * permits moved out to be reported (a location holder writes them to its storage then, so a
   * permit taken or reported is never held again after the holder is evicted, see QuotaHolder).
   */
  onChange: (() => void) | null = null;

  /** What it holds (a copy), to keep across an eviction (see `restore`). */
  held(): HeldStanding[] {
    return this.#held.map((h) => ({ ...h, admissionIds: [...h.admissionIds] }));
  }

  /**
   * Holds `held` again (kept by a holder evicted since), each usable `marginMs` less at both ends
   * of its minute: the clock that placed it may have been another host's.
   */
  restore(held: readonly HeldStanding[], marginMs: number): void {
    this.#held = held.map((h) => ({ ...h, from: h.from + marginMs, until: h.until - marginMs }));
  }

  /** Keeps `granted` (an answer under `policyVersion`, given at the object's `answeredAt`). */
  add(
    granted: readonly StandingPermit[] | undefined,
    policyVersion: number,
    answeredAt: number | undefined,
    sentAt: number,
    receivedAt: number,
  ): void {
    // An answer that does not say when it was given cannot place a minute: none is used.
    if (!granted || answeredAt === undefined) return;
    for (const s of granted)
      this.#held.push({
        id: s.id,
        left: s.permits,
        used: 0,
        from: receivedAt + (s.minuteStart - answeredAt),
        until: sentAt + (s.minuteStart + MINUTE_MS - answeredAt),
        minuteStart: s.minuteStart,
        policyVersion,
        admissionIds: [],
      });
    if (granted.length > 0) this.onChange?.();
  }

  /**
   * Takes a permit of the minute at `now` for a request on policy version `policyVersion` (only
   * one granted under that version), noting `admissionId`: the windows to show for it, built
   * from the windows of the holder's last contact `atContact` (the day counted the permit at its
   * grant; the minute counts the permits used here in it), or null when none is usable.
   */
  take(
    policyVersion: number,
    now: number,
    admissionId: string | null,
    atContact: readonly WindowStatus[],
  ): WindowStatus[] | null {
    const s = this.#held.find(
      (h) => h.left > 0 && h.from <= now && now < h.until && h.policyVersion === policyVersion,
    );
    if (!s) return null;
    s.left--;
    s.used++;
    if (admissionId !== null) s.admissionIds.push(admissionId);
    this.onChange?.();
    const usedThisMinute = this.#held
      .filter((h) => h.minuteStart === s.minuteStart)
      .reduce((n, h) => n + h.used, 0);
    return atContact.map((w) =>
      w.name === "minute"
        ? {
            ...w,
            remaining: Math.max(0, w.limit - usedThisMinute),
            resetAt: s.minuteStart + MINUTE_MS,
          }
        : w,
    );
  }

  /**
   * The reports of the permits done with at `now` (their minute over, or all used), to go back
   * with the holder's next call: what each served, with its admission ids. `all`: every permit
   * (a change to the key, a usage read, a hand-back of everything).
   */
  reports(now: number, { all = false }: { all?: boolean } = {}): ReturnedLease[] {
    return this.#reportsOf((h) => all || h.left === 0 || now >= h.until);
  }

  /**
   * The reports of the permits granted under an older policy version than `version` (the holder
   * learnt of a change whose push it missed): no request on the key as it is now may use them,
   * so they go back with the holder's next call rather than once their minutes are over.
   */
  reportsOlderThan(version: number): ReturnedLease[] {
    // Asked at every request, an isolate's too (which holds none): no work when none is held.
    if (this.#held.length === 0) return [];
    return this.#reportsOf((h) => h.policyVersion < version);
  }

  #reportsOf(isDone: (held: HeldStanding) => boolean): ReturnedLease[] {
    const done = this.#held.filter(isDone);
    if (done.length === 0) return [];
    this.#held = this.#held.filter((h) => !done.includes(h));
    this.onChange?.();
    return done.map((h) => ({
      id: h.id,
      unused: h.left,
      used: h.used,
      ...idsOf(h.admissionIds),
    }));
  }

  /**
   * `windows` (the key's object's, given before any grant in the same answer) with the permits
   * held here unused counted as room: in the minute window those of its minute (the object
   * counted them used when that minute started), in the day all of them (counted at the grant).
   */
  withOwnRoom(windows: WindowStatus[]): WindowStatus[] {
    return windows.map((w) => {
      const own = this.#held
        .filter((h) => w.name === "day" || h.minuteStart === w.resetAt - MINUTE_MS)
        .reduce((n, h) => n + h.left, 0);
      return own > 0 ? { ...w, remaining: Math.min(w.limit, w.remaining + own) } : w;
    });
  }

  /** Until when it holds permits not used yet (0: none). */
  get coveredUntil(): number {
    return this.#held.reduce((t, h) => (h.left > 0 ? Math.max(t, h.until) : t), 0);
  }

  /** The permits it holds for use at `now`. */
  usableAt(now: number): number {
    return this.#held.reduce((n, h) => (h.from <= now && now < h.until ? n + h.left : n), 0);
  }

  /** When its last permit's minute ends (0: it holds none). */
  get lastUntil(): number {
    return this.#held.reduce((t, h) => Math.max(t, h.until), 0);
  }

  /** Permits held and not used. */
  get unused(): number {
    return this.#held.reduce((n, h) => n + h.left, 0);
  }
}
