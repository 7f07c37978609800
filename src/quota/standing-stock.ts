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
  /** How much `from` and `until` were narrowed when it was held again (absent: never). */
  marginMs?: number;
  policyVersion: number;
  admissionIds: string[];
  /**
   * The windows each request admitted from it was answered with, by admission id, for the same
   * request asked again (answer lost, holder evicted). Absent: none kept (an earlier release's).
   */
  answers?: Record<string, WindowStatus[]>;
  /** Reported, no call carrying it answered yet (`forget`): `left` set to 0, used no more. */
  reported?: true;
}

/** What a location holder keeps across an eviction: its standing permits, and the key's arrivals. */
export interface StandingMemory {
  standing: HeldStanding[];
  lastArrival: number | null;
  gapMs: number;
  /** The key's windows at the last contact, which a request answered from a kept permit shows. */
  windows?: WindowStatus[];
}

/**
 * A location holder's standing permits (quota/standing.ts), each usable only within its minute by
 * the object's clock, which answered between this holder's `sentAt` and `receivedAt`: from
 * `receivedAt` plus the time to its minute's start, until `sentAt` plus the time to its end.
 */
export class StandingStock {
  #held: HeldStanding[] = [];
  /**
   * Called synchronously after every change to what is held (a location holder writes it to its
   * storage then, so a permit taken or reported is never held again after an eviction).
   */
  onChange: (() => void) | null = null;

  /** What it holds (a copy), to keep across an eviction. */
  held(): HeldStanding[] {
    return this.#held.map(({ answers, ...h }) => ({
      ...h,
      admissionIds: [...h.admissionIds],
      ...(answers && { answers: { ...answers } }),
    }));
  }

  /**
   * Holds `held` again (kept by a holder evicted since), each usable `marginMs` less at both ends
   * of its minute than where it was placed (once, however many evictions it outlives): the clock
   * that placed it may have been another host's.
   */
  restore(held: readonly HeldStanding[], marginMs: number): void {
    this.#held = held.map(({ marginMs: had = 0, ...h }) => {
      const more = Math.max(0, marginMs - had);
      return { ...h, from: h.from + more, until: h.until - more, marginMs: had + more };
    });
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
    // One asked again (a lost answer's id): a permit held already is held once, as it was used.
    const fresh = granted.filter((s) => !this.#held.some((h) => h.id === s.id));
    for (const s of fresh)
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
    if (fresh.length > 0) this.onChange?.();
  }

  /**
   * Holds `report`, of a lease waiting to go back with these permits (a location holder's stock
   * granted with them, its minute over, `until` by this holder's clock), as a permit reported:
   * kept across an eviction with them, so the hand-back at their end carries it, with the
   * requests it served, rather than the key's object stranding it.
   */
  keepWaiting(report: ReturnedLease, until: number, policyVersion: number): void {
    this.#held.push({
      id: report.id,
      left: 0,
      used: report.used,
      from: until,
      until,
      minuteStart: until - MINUTE_MS,
      policyVersion,
      admissionIds: [...(report.admissionIds ?? [])],
      reported: true,
    });
    this.onChange?.();
  }

  /**
   * Takes a permit of the minute at `now` under `policyVersion`: the windows to show for it, from
   * `atContact` (as `show` makes them, kept with `admissionId`), or null when none is usable.
   */
  take(
    policyVersion: number,
    now: number,
    admissionId: string | null,
    atContact: readonly WindowStatus[],
    show: (windows: WindowStatus[]) => WindowStatus[] = (windows) => windows,
  ): WindowStatus[] | null {
    const s = this.#held.find(
      (h) => h.left > 0 && h.from <= now && now < h.until && h.policyVersion === policyVersion,
    );
    if (!s) return null;
    s.left--;
    s.used++;
    const shown = show(this.#windowsOf(s, atContact));
    if (admissionId !== null) {
      s.admissionIds.push(admissionId);
      s.answers = { ...s.answers, [admissionId]: shown };
    }
    this.onChange?.();
    return shown;
  }

  /**
   * The windows request `admissionId` was answered with, if it was admitted from a permit held
   * here granted under `policyVersion` (asked again: no other permit is taken for it); else null.
   * A permit that kept no answer (an earlier release's) shows its minute as taking it did, given
   * windows of a contact to show (else null: the key's object decides, and counts it once).
   */
  answeredBefore(
    admissionId: string,
    policyVersion: number,
    atContact: readonly WindowStatus[],
  ): WindowStatus[] | null {
    const s = this.#held.find(
      (h) => h.policyVersion === policyVersion && h.admissionIds.includes(admissionId),
    );
    const kept = s?.answers?.[admissionId];
    if (!s || kept) return kept ?? null;
    return atContact.length > 0 ? this.#windowsOf(s, atContact) : null;
  }

  /** The windows `atContact` with the minute of permit `s` as its permits of that minute left it. */
  #windowsOf(s: HeldStanding, atContact: readonly WindowStatus[]): WindowStatus[] {
    const usedThisMinute = this.#held
      .filter((h) => h.minuteStart === s.minuteStart && (h === s || !h.reported))
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

  /** Permits done with at `now` (or `all`), reported; held till a call with them is answered. */
  reports(now: number, { all = false }: { all?: boolean } = {}): ReturnedLease[] {
    return this.#reportsOf((h) => all || h.left === 0 || now >= h.until);
  }

  /** The reports of the permits granted under an older policy version than `version`. */
  reportsOlderThan(version: number): ReturnedLease[] {
    // Asked at every request, an isolate's too (which holds none): no work when none is held.
    if (this.#held.length === 0) return [];
    return this.#reportsOf((h) => h.policyVersion < version);
  }

  /** The reports of the permits reported before and held still (kept across an eviction). */
  reportsPending(): ReturnedLease[] {
    return this.#held.filter((h) => h.reported).map(reportOf);
  }

  /** The reports of every permit held, reported before or not: for the hand-back at their end. */
  reportsKept(): ReturnedLease[] {
    return this.#held.map(reportOf);
  }

  /** Stops holding the permits `ids` (the key's object answered a call carrying their reports). */
  forget(ids: readonly string[]): void {
    const held = this.#held.filter((h) => !ids.includes(h.id));
    if (held.length === this.#held.length) return;
    this.#held = held;
    this.onChange?.();
  }

  #reportsOf(isDone: (held: HeldStanding) => boolean): ReturnedLease[] {
    const done = this.#held.filter((h) => !h.reported && isDone(h));
    if (done.length === 0) return [];
    const reports = done.map(reportOf);
    for (const h of done) Object.assign(h, { left: 0, reported: true });
    this.onChange?.();
    return reports;
  }

  /**
   * `windows` (the object's, before any grant in the same answer) with the permits held here
   * unused counted as room: in the minute those of its minute, in the day all of them.
   */
  withOwnRoom(windows: WindowStatus[]): WindowStatus[] {
    return windows.map((w) => {
      const own = this.#held
        .filter((h) => w.name === "day" || h.minuteStart === w.resetAt - MINUTE_MS)
        .reduce((n, h) => n + h.left, 0);
      return own > 0 ? { ...w, remaining: Math.min(w.limit, w.remaining + own) } : w;
    });
  }

  /** When its last permit not reported yet ends (0: none). */
  get heldUntil(): number {
    return this.#held.reduce((t, h) => (h.reported ? t : Math.max(t, h.until)), 0);
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

/** What goes back to the key's object of standing permit `h`: what it served, by admission id. */
const reportOf = (h: HeldStanding): ReturnedLease => ({
  id: h.id,
  unused: h.left,
  used: h.used,
  ...idsOf([...h.admissionIds]),
});
