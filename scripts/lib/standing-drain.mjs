// @ts-check
// The drain before a rollback (docs/operations.md, "Rolling back"). A location holder keeps
// standing permits for a sparse key's minutes to come, granted by the key's object; the release
// before this one does not count a minute's standing permits as the minute starts, so a rollback
// while some are out lets such a minute admit up to heldBound past its limit. So `npm run rollback`
// and the deploy's rollback first drain the release serving: a new version of it (its code and
// settings, with the secret STANDING_PERMITS_DRAINED set) in its place, whose objects grant none,
// deployed with `--durable-objects-code-update-mode immediate` so that no object keeps the code
// that grants; then they wait until every standing permit granted before has ended and been
// handed back (DRAIN_WAIT_MS), and only then roll back. Run again, a rollback finds the release
// drained and waits only for what is left. `--now` rolls back at once, over-admitting as above.
// No node module is imported here (the caller passes its `wrangler`), so the tests of the docs'
// numbers read DRAIN_WAIT_MS from this file.

/** The secret that drains a release of standing permits (STANDING_PERMITS_DRAINED in src/lib/config.ts). */
export const DRAIN_SECRET = "STANDING_PERMITS_DRAINED";

/** STANDING_MINUTES of src/quota/standing.ts: a grant covers the minutes after its own, this many. */
export const STANDING_MINUTES = 6;

/**
 * How long after the drained version starts serving no standing permit granted before is left:
 * a grant made just before covers at most the STANDING_MINUTES minutes after the minute it was
 * made in, so the last of them ends at most STANDING_MINUTES + 1 minutes on, and its holder hands
 * it back (or its alarm fires) a few seconds after; one minute more for the drained code to reach
 * every object (and for clocks).
 */
export const DRAIN_WAIT_MS = (STANDING_MINUTES + 2) * 60_000;

/** Over-admission, in the words every message uses when a rollback does not drain. */
export const UNDRAINED_RISK = `each minute of the next ${STANDING_MINUTES + 1} for which a location holder holds a key's standing permits may admit up to that key's heldBound past its per-minute limit`;

/**
 * Whether a version (`wrangler versions view --json`) is drained of standing permits.
 * @param {unknown} view
 */
export function isDrained(view) {
  const bindings =
    /** @type {{ resources?: { bindings?: Array<{ type?: string, name?: string }> } }} */ (view)
      ?.resources?.bindings;
  return (bindings ?? []).some((b) => b.type === "secret_text" && b.name === DRAIN_SECRET);
}

/**
 * What to drain before rolling back to `target`, from the deployment serving now: nothing (no
 * version but the target serves, or those that do are drained already: then since when), or the
 * one version to drain and how to deploy its drained copy in its place, or why it cannot be.
 * @param {{
 *   serving: Array<{ version_id: string, percentage: number }>,
 *   deployedAt: string | undefined,
 *   target: string,
 *   newest: string | undefined,
 *   drained: (id: string) => boolean,
 * }} now
 * @returns {{ kind: "none" } | { kind: "drained", since: number }
 *   | { kind: "drain", version: string, share: (drainedId: string) => string[] }
 *   | { kind: "cannot", why: string }}
 */
export function drainPlanOf({ serving, deployedAt, target, newest, drained }) {
  const others = serving.filter((v) => v.version_id !== target);
  if (others.length === 0) return { kind: "none" };
  if (others.every((v) => drained(v.version_id))) {
    const since = Date.parse(deployedAt ?? "");
    return Number.isNaN(since)
      ? { kind: "cannot", why: "the deployment serving now has no creation time (created_on)" }
      : { kind: "drained", since };
  }
  if (others.length > 1)
    return {
      kind: "cannot",
      why: `${others.length} versions other than ${target} serve (${others.map((v) => v.version_id).join(", ")})`,
    };
  const [other] = others;
  if (other.version_id !== newest)
    return {
      kind: "cannot",
      why: `the newest version ${newest ?? "(none)"} is not the one serving (${other.version_id}), and wrangler makes the drained version from the newest`,
    };
  const rest = serving.filter((v) => v.version_id === target);
  return {
    kind: "drain",
    version: other.version_id,
    share: (drainedId) => [
      `${drainedId}@${other.percentage}`,
      ...rest.map((v) => `${v.version_id}@${v.percentage}`),
    ],
  };
}

/** `ms` as minutes and seconds ("7 min 30 s"). @param {number} ms */
export function minutesAndSeconds(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  return s >= 60 ? `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}` : `${s} s`;
}

/** HH:MM:SS UTC of `t`. @param {number} t */
const clockOf = (t) => `${new Date(t).toISOString().slice(11, 19)} UTC`;

/**
 * Drains the release serving `env` of standing permits (unless it is already) and waits until
 * those granted before have ended, before a rollback to `target`. Calls `refuse` (which does not
 * return) when it cannot, naming `--now`, `nowFlag`, the way to roll back without it.
 * `wrangler` runs wrangler against `env` (lib/wrangler-remote.mjs).
 * @param {{ env: string, target: string, nowFlag: string, refuse: (message: string) => never,
 *   wrangler: typeof import("./wrangler-remote.mjs").wrangler,
 *   log?: (line: string) => void }} options
 */
export async function drainStandingPermitsOrRefuse({
  wrangler,
  env,
  target,
  nowFlag,
  refuse,
  log = (line) => console.log(line),
}) {
  /** @param {string[]} args @param {string} what */
  const json = (args, what) => {
    const r = wrangler(env, [...args, "--json"]);
    try {
      if (r.ok) return JSON.parse(r.output);
    } catch {
      // refused below, with what wrangler said
    }
    return refuse(`could not read ${what} to drain standing permits first:\n${r.output}`);
  };
  const deployment =
    /** @type {{ created_on?: string, versions?: Array<{ version_id: string, percentage: number }> }} */ (
      json(["deployments", "status"], "the current deployment")
    );
  const serving = deployment.versions ?? [];
  /** @type {Map<string, any>} */
  const views = new Map();
  const viewOf = (/** @type {string} */ id) => {
    if (!views.has(id)) views.set(id, json(["versions", "view", id], `version ${id}`));
    return views.get(id);
  };
  const versions = /** @type {Array<{ id: string }>} */ (
    json(["versions", "list"], "the versions")
  );
  const plan = drainPlanOf({
    serving,
    deployedAt: deployment.created_on,
    target,
    newest: versions.at(-1)?.id,
    drained: (id) => isDrained(viewOf(id)),
  });
  if (plan.kind === "none") return;
  if (plan.kind === "cannot")
    return refuse(
      `standing permits cannot be drained first: ${plan.why}.\n` +
        `Roll back without draining with ${nowFlag}: ${UNDRAINED_RISK}.`,
    );
  let since = plan.kind === "drained" ? plan.since : 0;
  if (plan.kind === "drained") log(`✓ standing permits drained since ${clockOf(since)}`);
  if (plan.kind === "drain") {
    const tag = viewOf(plan.version)?.annotations?.["workers/tag"];
    if (!tag)
      return refuse(
        `standing permits cannot be drained first: version ${plan.version} has no git revision tag. ` +
          `Roll back without draining with ${nowFlag}: ${UNDRAINED_RISK}.`,
      );
    const message = "drain standing permits before a rollback";
    const bulk = wrangler(env, ["versions", "secret", "bulk", "--tag", tag, "--message", message], {
      input: JSON.stringify({ [DRAIN_SECRET]: new Date().toISOString() }),
    });
    const drainedId = /Created version ([0-9a-f-]{36})/i.exec(bulk.output)?.[1];
    if (!bulk.ok || !drainedId)
      return refuse(
        `the drained version could not be made (wrangler versions secret bulk exited ${bulk.ok ? "0, no version id reported" : bulk.status}):\n${bulk.output}\n` +
          `Roll back without draining with ${nowFlag}: ${UNDRAINED_RISK}.`,
      );
    const share = plan.share(drainedId);
    const deploy = wrangler(
      env,
      [
        "versions",
        "deploy",
        ...share,
        "--yes",
        "--message",
        message,
        "--durable-objects-code-update-mode",
        "immediate",
      ],
      { inherit: true },
    );
    if (!deploy.ok)
      return refuse(
        `the drained version ${drainedId} could not be deployed (wrangler exited ${deploy.status}). ` +
          `Roll back without draining with ${nowFlag}: ${UNDRAINED_RISK}.`,
      );
    const after = /** @type {{ created_on?: string }} */ (
      json(["deployments", "status"], "the drained deployment")
    );
    since = Date.parse(after.created_on ?? "");
    if (Number.isNaN(since)) since = Date.now();
    log(
      `✓ standing permits drained: ${drainedId} (${plan.version} with ${DRAIN_SECRET} set) serves ${share[0].split("@")[1]} %, since ${clockOf(since)}`,
    );
  }
  const endsAt = since + DRAIN_WAIT_MS;
  if (Date.now() >= endsAt) {
    log("✓ every standing permit granted before the drain has ended");
    return;
  }
  log(
    `… waiting ${minutesAndSeconds(endsAt - Date.now())}, until ${clockOf(endsAt)}, for the standing permits granted before the drain to end.\n` +
      `  Interrupted, the drained version keeps serving: run the rollback again to wait what is left, or roll back with ${nowFlag} (${UNDRAINED_RISK}).`,
  );
  while (Date.now() < endsAt) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(60_000, endsAt - Date.now())));
    if (Date.now() < endsAt) log(`  ${minutesAndSeconds(endsAt - Date.now())} left`);
  }
  log("✓ every standing permit granted before the drain has ended");
}
