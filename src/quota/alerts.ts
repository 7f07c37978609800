import { DAY_MS } from "../lib/clock";
import type { Policy, UsageState } from "./windows";

/** The share of the day quota at which `quota.day.warning` is sent. */
export const DAY_WARNING_SHARE = 0.8;

/** An event the key's own counts produce (the webhook events about quota and bans). */
export interface QuotaAlert {
  type: "quota.day.warning" | "quota.day.exhausted" | "key.banned";
  /** The window the event is about (once per key and window): the day's start, or the ban's end. */
  window: number;
  /** When the window ends (epoch ms): the same alert cannot come again after it. */
  endsAt: number;
  data: Record<string, number | string>;
}

/** The count at which the day quota's warning fires: 80 % of it, rounded up (at least 1). */
export const dayWarningAt = (perDay: number): number =>
  Math.max(1, Math.ceil(perDay * DAY_WARNING_SHARE));

/**
 * The alerts a change of the key's windows from `before` to `after` produces: the day count
 * passing 80 % and 100 % of the day quota, and a ban starting (the caller keeps each once).
 */
export function alertsBetween(
  before: UsageState,
  after: UsageState,
  policy: Policy | null,
  now: number,
): QuotaAlert[] {
  if (!policy) return [];
  const alerts: QuotaAlert[] = [];
  const usedBefore = before.dayStart === after.dayStart ? before.dayCount : 0;
  const used = after.dayCount;
  const dayEnd = after.dayStart + DAY_MS;
  const crossed = (type: QuotaAlert["type"], threshold: number) => {
    if (usedBefore >= threshold || used < threshold) return;
    const remaining = Math.max(0, policy.perDay - used);
    const resetAt = new Date(dayEnd).toISOString();
    const data = { window: "day", limit: policy.perDay, used, remaining, threshold, resetAt };
    alerts.push({ type, window: after.dayStart, endsAt: dayEnd, data });
  };
  crossed("quota.day.warning", dayWarningAt(policy.perDay));
  crossed("quota.day.exhausted", policy.perDay);
  const until = after.bannedUntil;
  if (until > now && until > before.bannedUntil) {
    const at = new Date(until).toISOString();
    const data = { window: "minute", limit: policy.perMinute, bannedUntil: at, resetAt: at };
    alerts.push({ type: "key.banned", window: until, endsAt: until, data });
  }
  return alerts;
}
