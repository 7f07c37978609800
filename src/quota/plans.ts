export const PLANS = ["free", "pro", "business", "enterprise"] as const;
export type Plan = (typeof PLANS)[number];

export type Limits = { perMinute: number; perDay: number };

/** The published plan table; enterprise keys carry limits of their own. */
export const PLAN_LIMITS: Record<Exclude<Plan, "enterprise">, Limits> = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
};

/** The limits of `plan`; throws for an enterprise key without limits of its own (a bug upstream). */
export function limitsOrThrow(plan: Plan, own: Limits | null): Limits {
  if (plan === "enterprise") {
    if (!own) throw new Error("an enterprise key needs its own limits");
    return own;
  }
  return PLAN_LIMITS[plan];
}
