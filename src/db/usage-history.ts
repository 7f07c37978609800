import { DAY_MS, dayName, dayStartOf } from "../lib/clock";
import type { Plan } from "../quota/plans";
import { guarded, type Queryable } from "./database-error";

/**
 * What a key's quota object admitted (requests served) and refused on one UTC day (`day` is
 * YYYY-MM-DD), and the permits leased that day and never reported used (`stranded`: not requests,
 * never billed; see docs/quotas.md).
 */
export interface UsageDay {
  day: string;
  admitted: number;
  refused: { rate_limited: number; quota_exceeded: number; key_banned: number };
  stranded: number;
}

interface UsageDayRow {
  day: string;
  admitted: number;
  rate_limited: number;
  quota_exceeded: number;
  key_banned: number;
  stranded: number;
}

const toUsageDay = (r: UsageDayRow): UsageDay => ({
  day: r.day,
  admitted: r.admitted,
  refused: {
    rate_limited: r.rate_limited,
    quota_exceeded: r.quota_exceeded,
    key_banned: r.key_banned,
  },
  stranded: r.stranded,
});

/** Every day from `from` to `to` (YYYY-MM-DD, inclusive), oldest first: `held` where it has one (the last entry for a day wins), else zeros. */
export function everyDay(from: string, to: string, held: UsageDay[]): UsageDay[] {
  const byDay = new Map(held.map((d) => [d.day, d]));
  const days: UsageDay[] = [];
  for (let at = dayStartOf(from); at <= dayStartOf(to); at += DAY_MS) {
    const day = dayName(at);
    days.push(
      byDay.get(day) ?? {
        day,
        admitted: 0,
        refused: { rate_limited: 0, quota_exceeded: 0, key_banned: 0 },
        stranded: 0,
      },
    );
  }
  return days;
}

/**
 * A day's totals as the key's quota object holds them, with their revision: raised by every
 * change, so of two snapshots of one day the later has the higher revision.
 */
export interface RevisedUsageDay extends UsageDay {
  revision: number;
}

/**
 * Stores a key's daily totals, each day as a whole and only if it is at least as recent as the
 * stored one: a write that arrives after a newer one (two flushes racing) cannot undo it, and
 * totals that went down (the unused permits of a lease counted whole at grant, handed back)
 * replace the higher ones.
 */
export function saveUsageDays(
  db: Queryable,
  keyId: string,
  days: RevisedUsageDay[],
): Promise<void> {
  if (!days.length) return Promise.resolve();
  return guarded(async () => {
    // An equal revision is the same snapshot: writing it again changes nothing.
    const upsert = db.prepare(
      `INSERT INTO key_usage_days
         (key_id, day, admitted, rate_limited, quota_exceeded, key_banned, stranded, revision)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
       ON CONFLICT (key_id, day) DO UPDATE SET
         admitted = excluded.admitted,
         rate_limited = excluded.rate_limited,
         quota_exceeded = excluded.quota_exceeded,
         key_banned = excluded.key_banned,
         stranded = excluded.stranded,
         revision = excluded.revision
       WHERE excluded.revision >= key_usage_days.revision`,
    );
    await db.batch(
      days.map((d) =>
        upsert.bind(
          keyId,
          d.day,
          d.admitted,
          d.refused.rate_limited,
          d.refused.quota_exceeded,
          d.refused.key_banned,
          d.stranded,
          d.revision,
        ),
      ),
    );
  });
}

/** The stored days of one key from `from` to `to` (inclusive, YYYY-MM-DD), oldest first. */
export function readUsageDays(
  db: Queryable,
  keyId: string,
  from: string,
  to: string,
): Promise<UsageDay[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT day, admitted, rate_limited, quota_exceeded, key_banned, stranded FROM key_usage_days
         WHERE key_id = ?1 AND day BETWEEN ?2 AND ?3 ORDER BY day`,
      )
      .bind(keyId, from, to)
      .all<UsageDayRow>();
    return results.map(toUsageDay);
  });
}

/** One key's totals of one day, with what an invoice needs to know about the key. */
export interface KeyDayTotals extends UsageDay {
  keyId: string;
  name: string;
  plan: Plan;
  ownerId: string | null;
}

/**
 * Every key that existed before `dayEnd` (epoch ms) with its totals of `day`, zeros where it
 * made no request, in id order from after `afterKeyId`.
 */
export function listUsageOfDay(
  db: Queryable,
  {
    day,
    dayEnd,
    limit,
    afterKeyId,
  }: { day: string; dayEnd: number; limit: number; afterKeyId?: string },
): Promise<KeyDayTotals[]> {
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT k.id AS key_id, k.name, k.plan, k.owner_id, ?1 AS day,
                COALESCE(u.admitted, 0) AS admitted, COALESCE(u.rate_limited, 0) AS rate_limited,
                COALESCE(u.quota_exceeded, 0) AS quota_exceeded, COALESCE(u.key_banned, 0) AS key_banned,
                COALESCE(u.stranded, 0) AS stranded
         FROM api_keys k LEFT JOIN key_usage_days u ON u.key_id = k.id AND u.day = ?1
         WHERE k.created_at < ?2 AND k.id > ?3 ORDER BY k.id LIMIT ?4`,
      )
      .bind(day, dayEnd, afterKeyId ?? "", limit)
      .all<UsageDayRow & { key_id: string; name: string; plan: Plan; owner_id: string | null }>();
    return results.map((r) => ({
      ...toUsageDay(r),
      keyId: r.key_id,
      name: r.name,
      plan: r.plan,
      ownerId: r.owner_id,
    }));
  });
}

/** The latest day (YYYY-MM-DD) D1 holds any request of each of `keyIds` for (at most 100 ids). */
export function lastUsedDays(db: Queryable, keyIds: string[]): Promise<Map<string, string>> {
  if (!keyIds.length) return Promise.resolve(new Map());
  return guarded(async () => {
    const { results } = await db
      .prepare(
        `SELECT key_id, MAX(day) AS day FROM key_usage_days
         WHERE key_id IN (${keyIds.map(() => "?").join(", ")})
           AND admitted + rate_limited + quota_exceeded + key_banned > 0
         GROUP BY key_id`,
      )
      .bind(...keyIds)
      .all<{ key_id: string; day: string }>();
    return new Map(results.map((r) => [r.key_id, r.day]));
  });
}
