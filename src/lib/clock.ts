/**
 * The service's one source of time. Tests replace `clock.now` (vi.spyOn) to move through
 * minute/day windows, bans and the getPet sunset without sleeping; the Worker and its
 * Durable Objects share this module because they run in one isolate under test.
 */
export const clock = {
  now: (): number => Date.now(),
};

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;
