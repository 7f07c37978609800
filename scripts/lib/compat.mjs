// @ts-check
// What a release reads and writes (compat/release.json, compat/README.md), and whether a rollback
// from one release to another is safe: `npm run rollback`, the deploy's automatic rollback and
// `npm run rehearse:rollback` ask here.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const MANIFEST_PATH = "compat/release.json";
const BEFORE_MANIFEST = "compat/before-manifest";

/**
 * @typedef {{ reads: string[], writes: string[] }} ReadsWrites
 * @typedef {{
 *   previousRelease?: string,
 *   keys: ReadsWrites, cursors: ReadsWrites, bookmarks: ReadsWrites,
 *   d1: { migrations: string[], contract: string[] },
 *   objects: Record<string, { writes: number, readsThrough: number }>,
 * }} ReleaseManifest
 */

/**
 * What the release at `commit` reads and writes: its compat/release.json, else the fixture kept
 * here for a release made before that file existed, else null (nothing is known of it).
 * `checkout`: a directory holding that release's files (read instead of git, which also covers a
 * checkout with uncommitted changes). `cwd`: the git repository to ask.
 * @param {string} commit
 * @param {string} [checkout]
 * @param {string} [cwd]
 * @returns {{ manifest: ReleaseManifest, source: string } | null}
 */
export function releaseManifestAt(commit, checkout, cwd = process.cwd()) {
  if (checkout && existsSync(path.join(checkout, MANIFEST_PATH)))
    return {
      manifest: JSON.parse(readFileSync(path.join(checkout, MANIFEST_PATH), "utf8")),
      source: MANIFEST_PATH,
    };
  const shown = spawnSync("git", ["show", `${commit}:${MANIFEST_PATH}`], {
    cwd,
    encoding: "utf8",
  });
  if (shown.status === 0) return { manifest: JSON.parse(shown.stdout), source: MANIFEST_PATH };
  const full = spawnSync("git", ["rev-parse", "--verify", "--quiet", `${commit}^{commit}`], {
    cwd,
    encoding: "utf8",
  }).stdout?.trim();
  for (const dir of [path.join(cwd, BEFORE_MANIFEST), path.join(ROOT, BEFORE_MANIFEST)]) {
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
      const fixture = JSON.parse(readFileSync(path.join(dir, file), "utf8"));
      if (fixture.commit === full || (commit.length >= 7 && fixture.commit.startsWith(commit)))
        return { manifest: fixture, source: `${BEFORE_MANIFEST}/${file}` };
    }
  }
  return null;
}

/**
 * What `target` cannot read of what `current` has written (one sentence each; empty: the
 * rollback is safe).
 * @param {ReleaseManifest} current @param {ReleaseManifest} target
 * @returns {string[]}
 */
export function unreadableByTarget(current, target) {
  /** @type {string[]} */
  const problems = [];
  for (const [what, name] of /** @type {const} */ ([
    ["keys", "API keys"],
    ["cursors", "page cursors"],
    ["bookmarks", "D1 bookmarks"],
  ])) {
    const missing = current[what].writes.filter((f) => !target[what].reads.includes(f));
    if (missing.length)
      problems.push(
        `${name} in the format ${missing.join(", ")}: issued by the current release, ${
          what === "keys" ? "refused (401) by" : "rejected (400) by"
        } the target`,
      );
  }
  for (const [name, object] of Object.entries(current.objects)) {
    const readsThrough = target.objects[name]?.readsThrough ?? 0;
    if (object.writes > readsThrough)
      problems.push(
        `${name} storage at schema version ${object.writes}: the target opens versions up to ${readsThrough} ` +
          "only, so every object migrated since would fail on each call (quotas off: the Worker fails open)",
      );
  }
  const contracting = current.d1.contract.filter((m) => !target.d1.migrations.includes(m));
  if (contracting.length)
    problems.push(
      `D1 after ${contracting.join(", ")}: removes or narrows what the target still uses`,
    );
  return problems;
}

/**
 * Why a rollback from the release `currentCommit` to `targetCommit` is not safe (a message naming
 * what the target cannot read and what to do), or null when it is. A release whose record is
 * unknown is refused too: nothing says what it reads.
 * @param {{ currentCommit: string, targetCommit: string, currentCheckout?: string, cwd?: string,
 *   target: string }} options  `target`: how the message names the target (its version id)
 */
export function rollbackProblem({ currentCommit, targetCommit, currentCheckout, cwd, target }) {
  const current = releaseManifestAt(currentCommit, currentCheckout, cwd);
  const previous = releaseManifestAt(targetCommit, undefined, cwd);
  const unknown = [
    ...(current ? [] : [`the current release (${currentCommit})`]),
    ...(previous ? [] : [`the target release (${targetCommit})`]),
  ];
  const problems = unknown.length
    ? [
        `what ${unknown.join(" and ")} reads and writes: no ${MANIFEST_PATH} at that commit and no ${BEFORE_MANIFEST} fixture (is the commit fetched? git fetch --tags)`,
      ]
    : unreadableByTarget(
        /** @type {ReleaseManifest} */ (current?.manifest),
        /** @type {ReleaseManifest} */ (previous?.manifest),
      );
  if (problems.length === 0) return null;
  // D1 Time Travel takes D1 back (the keys issued since go with it), not the objects' storage.
  const objectStorage = problems.some((p) => /schema version/.test(p));
  return (
    `${target} (${targetCommit.slice(0, 7)}) cannot read what ${currentCommit.slice(0, 7)} has written:\n` +
    problems.map((p) => `  - ${p}`).join("\n") +
    "\nRolling back would turn quotas off or refuse keys, so it is refused. Instead" +
    ' (docs/operations.md, "Rolling back"):\n' +
    "  - roll forward: fix the current release and deploy the fix (npm run deploy:<env>)" +
    (objectStorage
      ? ";\n    for Durable Object storage this is the only way: restoring D1 does not take objects back."
      : ", or\n  - restore D1 with Time Travel to a moment before the upgrade, accept the loss of what was\n" +
        "    written since (keys issued since are gone), then roll back.")
  );
}

/** The commit a version's git revision tag names, in the repository at `cwd`, or null. */
export function commitOfRevision(/** @type {string} */ revision, cwd = process.cwd()) {
  const r = spawnSync("git", ["rev-parse", "--verify", "--quiet", `${revision}^{commit}`], {
    cwd,
    encoding: "utf8",
  });
  return r.status === 0 ? r.stdout.trim() : null;
}

/**
 * The git revision a Worker version was uploaded with (`wrangler versions view <id> --json`: the
 * deploy tags each version with its commit), or null.
 * @param {{ annotations?: Record<string, string> } | null} version
 */
export const revisionOfVersion = (version) => version?.annotations?.["workers/tag"] || null;

/**
 * Why rolling back to the Worker version `targetVersion` would leave what `servingVersions` wrote
 * unreadable (a message), or null when it is safe. Each version's release is found through its
 * git revision tag (`versionView`: `wrangler versions view <id> --json`); `current`, when given,
 * is what the serving side is known to be without asking (the deploy: this checkout).
 * @param {{ servingVersions: string[], targetVersion: string,
 *   versionView: (id: string) => { annotations?: Record<string, string> } | null,
 *   current?: { commit: string, checkout: string }, cwd?: string }} options
 */
export function rollbackTargetProblem({
  servingVersions,
  targetVersion,
  versionView,
  current,
  cwd = process.cwd(),
}) {
  /** @param {string} id @returns {{ commit: string } | { problem: string }} */
  const releaseOf = (id) => {
    const revision = revisionOfVersion(versionView(id));
    if (!revision)
      return {
        problem: `version ${id} has no git revision tag, so what it reads and writes is unknown (wrangler versions view ${id})`,
      };
    const commit = commitOfRevision(revision, cwd);
    if (!commit)
      return {
        problem: `version ${id} was deployed from ${revision}, which this checkout does not have (git fetch origin, then try again)`,
      };
    return { commit };
  };
  const target = releaseOf(targetVersion);
  if ("problem" in target) return `cannot check ${targetVersion}: ${target.problem}.`;
  const sources = current
    ? [{ id: "this release", commit: current.commit, checkout: current.checkout }]
    : servingVersions
        .filter((id) => id !== targetVersion)
        .map((id) => ({ id, ...releaseOf(id), checkout: undefined }));
  for (const source of sources) {
    if ("problem" in source) return `cannot check what serves now: ${source.problem}.`;
    const problem = rollbackProblem({
      currentCommit: /** @type {string} */ (source.commit),
      currentCheckout: source.checkout,
      targetCommit: target.commit,
      target: targetVersion,
      cwd,
    });
    if (problem) return problem;
  }
  return null;
}
