/**
 * The service's one source of time. Tests replace `clock.now` (vi.spyOn) to move through
 * minute/day windows, bans and the getPet sunset without sleeping; the Worker and its
 * Durable Objects share this module because they run in one isolate under test.
 */
export const clock = {
  now: (): number => Date.now(),
  /** Waits `ms` of real time (tests replace it to hold or release background work at will). */
  sleep: (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms)),
};

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

/** When the UTC minute that contains `ms` ends. */
export const minuteEndOf = (ms: number): number => ms - (ms % MINUTE_MS) + MINUTE_MS;

/** "YYYY-MM-DD" of the UTC day that contains `ms`. */
export const dayName = (ms: number): string =>
  new Date(ms - (ms % DAY_MS)).toISOString().slice(0, 10);

/** The instant `ms` (epoch ms) as an ISO 8601 UTC timestamp; null (a time not set) stays null. */
export function isoTime(ms: number): string;
export function isoTime(ms: number | null): string | null;
export function isoTime(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The start (epoch ms) of the UTC day named "YYYY-MM-DD". */
export const dayStartOf = (day: string): number => Date.parse(`${day}T00:00:00Z`);
