// @ts-check
// The decisions of `npm run deploy:*` and `npm run rollback`, as pure functions of what wrangler,
// git and wrangler.toml said: each returns the problem to report (a sentence), or null.

/** Each entry: the secrets of which one must be set (named ADMIN_TOKENS may replace ADMIN_TOKEN). */
export const REQUIRED_SECRETS = [
  ["ADMIN_TOKEN", "ADMIN_TOKENS"],
  ["CURSOR_SECRET"],
  ["KEY_TAG_SECRET"],
  ["WEBHOOK_ENCRYPTION_KEY"],
];

/** A UUID made of at most three distinct hex digits (00000000-0000-4000-8000-…) is a placeholder. */
export const isPlaceholderId = (/** @type {string | undefined} */ id) =>
  !id || new Set(id.replace(/-/g, "")).size <= 3;

export const isPlaceholderOrigin = (/** @type {string | undefined} */ origin) =>
  !origin ||
  !URL.canParse(origin) ||
  /(^|\.)example\.(com|org|net)$|\.example\.workers\.dev$/.test(new URL(origin).hostname);

/**
 * The host names the environment's routes serve (`api.example.com` of "api.example.com/*" or of
 * a custom domain), from wrangler's `route` and `routes` settings.
 * @param {{ route?: unknown, routes?: unknown[] }} config
 */
export function routeHostsOf(config) {
  const routes = [...(config.routes ?? []), ...(config.route ? [config.route] : [])];
  return routes.map((route) => {
    const pattern =
      typeof route === "string" ? route : /** @type {{ pattern: string }} */ (route).pattern;
    return pattern
      .replace(/^https?:\/\//, "")
      .split("/")[0]
      .replace(/^\*\.?/, "");
  });
}

/**
 * Whether the environment has an address, and PUBLIC_ORIGIN is one of them: production needs a
 * route or a custom domain (it has no workers.dev address); staging may use workers.dev.
 * @param {string} env
 * @param {{ route?: unknown, routes?: unknown[], workers_dev?: boolean }} config
 * @param {string} publicOrigin
 */
export function addressProblem(env, config, publicOrigin) {
  const hosts = routeHostsOf(config);
  const workersDev = env !== "production" && config.workers_dev === true;
  if (hosts.length === 0 && !workersDev)
    return (
      `[env.${env}] has no route or custom domain${env === "production" ? "" : " and workers_dev is off"}: ` +
      "a deploy would succeed with no address. Add one to wrangler.toml, e.g.\n" +
      `  routes = [{ pattern = "${new URL(publicOrigin).hostname}", custom_domain = true }]`
    );
  const host = new URL(publicOrigin).hostname;
  if (!(workersDev && host.endsWith(".workers.dev")) && !hosts.includes(host))
    return `PUBLIC_ORIGIN ${publicOrigin} is not served by [env.${env}]'s routes (${hosts.join(", ") || "none"}${workersDev ? ", or workers.dev" : ""}).`;
  return null;
}

/**
 * The compatibility date must be one the pinned runtime (workerd) knows, and not in the future.
 * @param {string | undefined} date @param {string} runtimeDate @param {string} today (YYYY-MM-DD)
 */
export function compatibilityDateProblem(date, runtimeDate, today) {
  if (!date || !/^\d{4}-\d{2}-\d{2}$/.test(date))
    return `compatibility_date ${date ?? "(unset)"} is not a YYYY-MM-DD date.`;
  if (date > runtimeDate)
    return `compatibility_date ${date} is newer than the pinned runtime supports (${runtimeDate}, workerd in package.json): what was tested locally is not what would run.`;
  if (date > today) return `compatibility_date ${date} is in the future (today is ${today}).`;
  return null;
}

/**
 * The required secrets not among `names` (the first name of each, the one to set).
 * @param {string[]} names
 */
export const missingSecrets = (names) =>
  REQUIRED_SECRETS.filter((anyOf) => !anyOf.some((n) => names.includes(n))).map(
    (anyOf) => anyOf[0],
  );

/**
 * The version serving most of the traffic in a deployment (`wrangler deployments status --json`):
 * what a failed rollout goes back to.
 * @param {{ versions?: Array<{ version_id: string, percentage: number }> } | null} deployment
 */
export function stableVersionOf(deployment) {
  const versions = [...(deployment?.versions ?? [])];
  versions.sort((a, b) => b.percentage - a.percentage);
  return versions[0]?.version_id ?? null;
}

/**
 * The version a plain rollback goes back to: the one serving most of the traffic in the
 * deployment before the latest (`wrangler deployments list --json`, oldest first), or null.
 * @param {Array<{ created_on?: string, versions?: Array<{ version_id: string, percentage: number }> }> | null} deployments
 */
export function deployedBeforeOf(deployments) {
  const sorted = [...(deployments ?? [])].sort((a, b) =>
    (a.created_on ?? "").localeCompare(b.created_on ?? ""),
  );
  return sorted.length < 2 ? null : stableVersionOf(sorted[sorted.length - 2] ?? null);
}

/**
 * The migration files `wrangler d1 migrations list --remote` reports as pending.
 * @param {string} output
 */
export function pendingMigrationsOf(output) {
  if (/No migrations to apply/.test(output)) return [];
  return [...new Set(output.match(/\b\d{4}_[\w.-]+\.sql\b/g) ?? [])];
}

/**
 * A rollout percentage: an integer from 1 to 99 (100 is the promotion that follows the smoke test).
 * @param {string} value
 */
export const isRolloutPercentage = (value) =>
  /^\d{1,2}$/.test(value) && Number(value) >= 1 && Number(value) <= 99;

/**
 * How long the canary bakes (serves its share beside the version before, smoke-tested over and
 * over) before it is promoted to 100 %, when `--bake` does not say: production waits longer,
 * since its traffic is what a bad release would hurt; staging only needs to show the release
 * survives a few rounds.
 */
export const DEFAULT_BAKE_MS = { production: 5 * 60_000, staging: 60_000 };
/** How often the smoke test runs during the bake, when `--smoke-every` does not say. */
export const DEFAULT_SMOKE_EVERY_MS = 30_000;

/**
 * A duration as the deploy's options take it, in milliseconds: whole seconds or minutes
 * ("90s", "5m"), or "0"; null for anything else.
 * @param {string} text
 */
export function durationMsOf(text) {
  if (text === "0") return 0;
  const match = /^([1-9]\d{0,4})(s|m)$/.exec(text);
  if (!match) return null;
  return Number(match[1]) * (match[2] === "m" ? 60_000 : 1000);
}

/**
 * A duration for people: "5m", "45s", "1m 30s", "0s".
 * @param {number} ms
 */
export function formatDuration(ms) {
  const seconds = Math.round(ms / 1000);
  const minutes = Math.floor(seconds / 60);
  const rest = seconds % 60;
  if (minutes === 0) return `${rest}s`;
  return rest === 0 ? `${minutes}m` : `${minutes}m ${rest}s`;
}

/**
 * When the bake's smoke tests run, in milliseconds after the canary went live: every
 * `smokeEveryMs`, and once at the very end, so the last one is as late as the bake goes.
 * @param {number} bakeMs @param {number} smokeEveryMs
 */
export function bakeSmokeTimesOf(bakeMs, smokeEveryMs) {
  /** @type {number[]} */
  const times = [];
  for (let at = smokeEveryMs; at < bakeMs; at += smokeEveryMs) times.push(at);
  if (bakeMs > 0) times.push(bakeMs);
  return times;
}
