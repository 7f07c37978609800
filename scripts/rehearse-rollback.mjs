#!/usr/bin/env node
// @ts-check
// `npm run rehearse:rollback [-- --previous <commit>] [--current <commit|worktree>]`
//
// Rehearses a rollback with the real previous release: its commit is checked out as a git
// worktree beside this one (under .rehearsal/, installed with `npm ci` there) and both releases
// serve in turn, under `wrangler dev` on one port over one shared state directory (D1 and every
// Durable Object), the way production switches versions over one database and one set of
// objects:
//
//   0. previous serves (before the upgrade): D1 migrations as its deploy applies them; it issues
//      keys, and a key allowing 10 a day makes its first requests;
//   1. current serves (the upgrade): its migrations; it issues keys; that day quota is used up
//      here, and a second tiny key starts;
//   2. previous serves again (the rollback; no migrations, as a rollback runs none): it issues a
//      key; the quota used up on the other side is checked here, and the second key's day is
//      used up here;
//   3. current serves again (roll forward): every key, and both used-up quotas.
//
// Traffic keeps going through each switch. Each side's admin API reads every key's usage. It
// passes only when every key works on both sides (no 401, no 5xx), no minute or day window
// admitted past its limit, every admitted request is counted in the day's usage, and a day
// quota used up on one side is refused on the other. Exit 0 when it passes, 1 when it fails,
// 2 for bad arguments.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { releaseManifestAt } from "./lib/compat.mjs";
import {
  cleanupNow,
  freePort,
  issueKey,
  makeTempDir,
  ROOT,
  runWrangler,
  startWranglerDev,
} from "./lib/local-server.mjs";

const USAGE = `Usage: npm run rehearse:rollback [-- --previous <commit>] [--current <commit|worktree>]

  --previous <commit>          the release rolled back to (default: the previous release
                               recorded in compat/release.json of the current one)
  --current <commit|worktree>  the release rolled back from: a commit (checked out beside this
                               one) or the path of a checkout (default: this checkout)
  --help                       this text

Runs both releases in turn under wrangler dev over one shared state (previous → current →
previous → current), with keys issued by each, traffic through every switch and a day quota
used up on one side and checked on the other. Exits 0 when the rollback is safe, 1 when not.`;

/** @returns {{ previous: string | undefined, current: string | undefined }} */
function argumentsOrExit() {
  try {
    const { values } = parseArgs({
      options: {
        previous: { type: "string" },
        current: { type: "string" },
        help: { type: "boolean", default: false },
      },
    });
    if (values.help) {
      console.log(USAGE);
      process.exit(0);
    }
    return { previous: values.previous, current: values.current };
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    process.exit(2);
  }
}

const args = argumentsOrExit();

/** @param {string} message @returns {never} */
function stop(message) {
  console.error(`✗ rehearse:rollback: ${message}`);
  cleanupNow();
  process.exit(2);
}

/** @param {string[]} gitArgs @param {string} [cwd] */
function git(gitArgs, cwd = ROOT) {
  const run = spawnSync("git", gitArgs, { cwd, encoding: "utf8" });
  return { ok: run.status === 0, out: (run.stdout ?? "").trim(), err: (run.stderr ?? "").trim() };
}

/** The full commit id of `rev` in this repository, or null. */
function commitOf(/** @type {string} */ rev) {
  const r = git(["rev-parse", "--verify", "--quiet", `${rev}^{commit}`]);
  return r.ok ? r.out : null;
}

const WORKTREES = path.join(ROOT, ".rehearsal");

/**
 * A checkout of `commit` beside this one (.rehearsal/<commit>), installed with `npm ci` there:
 * made once, then reused.
 * @param {string} commit
 */
function installedCheckoutOf(commit) {
  const dir = path.join(WORKTREES, commit);
  if (!existsSync(path.join(dir, "package.json"))) {
    mkdirSync(WORKTREES, { recursive: true });
    git(["worktree", "prune"]);
    const add = git(["worktree", "add", "--detach", dir, commit]);
    if (!add.ok) stop(`could not check out ${commit} beside this checkout:\n${add.err}`);
  }
  const done = path.join(dir, "node_modules", ".rehearsal-installed");
  if (!existsSync(done)) {
    console.log(`… npm ci in ${path.relative(ROOT, dir)} (the release's own dependencies)`);
    const started = Date.now();
    const install = spawnSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, PUPPETEER_SKIP_DOWNLOAD: "1" },
    });
    if (install.status !== 0)
      stop(`npm ci failed in ${dir}:\n${`${install.stdout}${install.stderr}`.slice(-3000)}`);
    writeFileSync(done, `${new Date().toISOString()}\n`);
    console.log(`  installed in ${Math.round((Date.now() - started) / 1000)} s`);
  }
  return dir;
}

/**
 * @typedef {{ label: string, commit: string, short: string, dir: string, wranglerJs: string }} Release
 * @param {string} label
 * @param {string} commit
 * @param {string} dir
 * @returns {Release}
 */
function release(label, commit, dir) {
  const wranglerJs = path.join(dir, "node_modules/wrangler/bin/wrangler.js");
  if (!existsSync(wranglerJs)) stop(`${dir} has no installed wrangler (run npm ci there)`);
  return { label, commit, short: commit.slice(0, 7), dir, wranglerJs };
}

// ------------------------------------------------------------------ the two releases
/** @type {Release} */
let current;
if (args.current && existsSync(args.current)) {
  const dir = realpathSync(args.current);
  const head = git(["rev-parse", "HEAD"], dir);
  if (!head.ok) stop(`--current ${args.current} is not a git checkout`);
  const dirty = git(["status", "--porcelain", "--untracked-files=no"], dir).out;
  current = release("current", `${head.out}${dirty ? "+changes" : ""}`, dir);
} else if (args.current) {
  const commit = commitOf(args.current);
  if (!commit) stop(`--current ${args.current} is neither a directory nor a commit`);
  current = release("current", commit, installedCheckoutOf(commit));
} else {
  const head = git(["rev-parse", "HEAD"]).out;
  const dirty = git(["status", "--porcelain", "--untracked-files=no"]).out;
  current = release("current", `${head}${dirty ? "+changes" : ""}`, ROOT);
}

const recordedPrevious = (() => {
  const file = path.join(current.dir, "compat/release.json");
  if (!existsSync(file)) return undefined;
  return /** @type {{ previousRelease?: string }} */ (JSON.parse(readFileSync(file, "utf8")))
    .previousRelease;
})();
const previousRev = args.previous ?? recordedPrevious;
if (!previousRev)
  stop(
    `the current release (${current.dir}) records no previous release (compat/release.json): name one with --previous <commit>`,
  );
const previousCommit = commitOf(previousRev);
if (!previousCommit) stop(`--previous ${previousRev} is not a commit of this repository`);
const previous = release("previous", previousCommit, installedCheckoutOf(previousCommit));

// What each release says it reads and writes (compat/release.json, or the fixture kept for a
// release made before the manifest), shown in the report beside what actually happened.
const manifests = {
  previous: releaseManifestAt(previous.commit),
  current: releaseManifestAt(current.commit.replace(/\+changes$/, ""), current.dir),
};

// ------------------------------------------------------------------ serving
const stateRoot = makeTempDir("animal-store-rehearsal-");
const shared = path.join(stateRoot, "shared-state");
const port = await freePort();
const inspectorPort = await freePort();
const url = `http://127.0.0.1:${port}`;
const adminToken = `rehearsal-admin-${randomBytes(18).toString("hex")}`;
// One set of secrets for both, as in production: a rollback keeps the Worker's secrets.
const envFile = path.join(stateRoot, "secrets.env");
writeFileSync(
  envFile,
  `ADMIN_TOKEN=${adminToken}\nCURSOR_SECRET=${randomBytes(24).toString("hex")}\n` +
    `KEY_TAG_SECRET=${randomBytes(24).toString("hex")}\n` +
    `WEBHOOK_ENCRYPTION_KEY=${randomBytes(32).toString("base64")}\n`,
  { mode: 0o600 },
);

/** @type {{ release: Release, stop: () => Promise<unknown>, logFile: string } | null} */
let serving = null;
/** Server log lines worth showing (errors, exceptions), per release label. */
const serverErrors = { previous: new Set(), current: new Set() };

/** @param {Release} r */
async function applyMigrations(r) {
  const out = await runWrangler(
    [
      "d1",
      "migrations",
      "apply",
      "DB",
      "--local",
      "--config",
      path.join(r.dir, "wrangler.toml"),
      "--persist-to",
      shared,
    ],
    { cwd: r.dir, wranglerJs: r.wranglerJs },
  );
  const applied = [...new Set(out.match(/\d{4}_[\w.-]+\.sql(?= *│ *✅)/g) ?? [])];
  say(
    applied.length
      ? `D1 migrations applied by ${r.label}: ${applied[0]} … ${applied.at(-1)} (${applied.length})`
      : `D1 migrations: none pending for ${r.label}`,
  );
}

function collectErrors() {
  if (!serving || !existsSync(serving.logFile)) return;
  for (const line of readFileSync(serving.logFile, "utf8").split("\n")) {
    // Without wrangler's colours.
    const plain = line.replace(/\u001b\[[0-9;]*m/g, "").replace(/\s+/g, " ");
    if (/error|exception|newer than this code/i.test(plain) && !plain.startsWith('{"requestId"'))
      serverErrors[/** @type {"previous" | "current"} */ (serving.release.label)].add(
        plain.slice(0, 240),
      );
  }
}

/** Stops the release serving (its log's errors kept for the report). */
async function stopServing() {
  if (!serving) return;
  collectErrors();
  const stopping = serving;
  serving = null;
  await stopping.stop();
}

/** Stops what serves, then serves `r` on the same port (the switch). @param {Release} r */
async function serve(r, { migrate = false } = {}) {
  await stopServing();
  if (migrate) await applyMigrations(r);
  const started = Date.now();
  const server = await startWranglerDev({
    name: `${r.label}-${Date.now()}`,
    config: path.join(r.dir, "wrangler.toml"),
    port,
    inspectorPort,
    dir: stateRoot,
    persistTo: shared,
    wranglerJs: r.wranglerJs,
    cwd: r.dir,
    extraArgs: ["--env-file", envFile],
    probePath: "/v1/openapi.json",
    localObservability: false,
  });
  serving = { release: r, stop: server.stop, logFile: server.logFile };
  say(`${r.label} (${r.short}) serves ${url} (started in ${Date.now() - started} ms)`);
}

// ------------------------------------------------------------------ keys and traffic
/**
 * @typedef {{ name: string, id: string, secret: string, issuedBy: string, format: string,
 *   limits: { perMinute: number, perDay: number } }} Key
 * @typedef {{ key: string, side: string, phase: number, status: number, code: string,
 *   at: number }} Answer
 */
/** @type {Key[]} */
const keys = [];
/** @type {Answer[]} */
const answers = [];
let phase = 0;

const say = (/** @type {string} */ line) => console.log(`  ${line}`);

/** @param {string} name @param {string} plan @param {{ perMinute: number, perDay: number }} [limits] */
async function issue(name, plan, limits) {
  if (!serving) throw new Error("nothing serves");
  const issued = await issueKey({ url, adminToken }, { name: `rehearsal-${name}`, plan, limits });
  const format = /_[0-9A-Za-z]{20}_[0-9a-f]{32}$/.test(issued.key) ? "routed" : "plain";
  const key = {
    name,
    id: issued.id,
    secret: issued.key,
    issuedBy: serving.release.label,
    format,
    limits: issued.limits,
  };
  keys.push(key);
  say(
    `issued ${name} (${plan}, ${key.limits.perMinute}/min, ${key.limits.perDay}/day; ${format} key) on ${key.issuedBy}`,
  );
  return key;
}

/**
 * One API request with `key`, recorded with the side that answered: the release serving when it
 * was sent and when its answer came, or "switch" when those differ (it was sent while one release
 * stopped or the other started).
 */
async function request(/** @type {Key} */ key) {
  const sentTo = serving;
  /** @type {Answer} */
  const answer = { key: key.name, side: "switch", phase, status: 0, code: "no answer", at: 0 };
  try {
    const res = await fetch(`${url}/v1/pets?limit=1`, {
      headers: { Authorization: `Bearer ${key.secret}` },
      signal: AbortSignal.timeout(10_000),
    });
    answer.status = res.status;
    const body = /** @type {{ code?: string }} */ (await res.json().catch(() => ({})));
    answer.code = res.status === 200 ? "ok" : (body.code ?? `HTTP ${res.status}`);
  } catch {
    // Connection refused while one release stops and the other starts: nothing was served.
  }
  answer.at = Date.now();
  if (sentTo && serving === sentTo) answer.side = sentTo.release.label;
  answers.push(answer);
  return answer;
}

/** `n` requests with `key`, one after another; prints what they got. */
async function send(/** @type {Key} */ key, /** @type {number} */ n) {
  /** @type {Map<string, number>} */
  const got = new Map();
  for (let i = 0; i < n; i++) {
    const a = await request(key);
    const label = a.status ? `${a.status}${a.code === "ok" ? "" : ` ${a.code}`}` : a.code;
    got.set(label, (got.get(label) ?? 0) + 1);
  }
  say(
    `${key.name} → ${serving?.release.label}: ${[...got].map(([s, c]) => `${c}× ${s}`).join(", ")}`,
  );
}

/** Traffic on `some` keys every 250 ms while `switching` runs: requests during the switch. */
async function switchWithTraffic(
  /** @type {Key[]} */ some,
  /** @type {() => Promise<void>} */ switching,
) {
  let going = true;
  const loop = (async () => {
    while (going) {
      await Promise.all(some.map((k) => request(k)));
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const before = answers.length;
  await switching();
  // A few rounds against the new side before the traffic stops.
  await new Promise((r) => setTimeout(r, 600));
  going = false;
  await loop;
  const during = answers.slice(before);
  const served = during.filter((a) => a.status);
  say(
    `traffic through the switch: ${during.length} requests, ${served.length} answered ` +
      `(${[...new Set(served.map((a) => `${a.side} ${a.status}`))].join(", ") || "none"}), ` +
      `${during.length - served.length} not answered while no release served`,
  );
}

/**
 * Each key's usage as the serving side's admin API reads it: its day count, against what the
 * rehearsal saw admitted today.
 * @type {Array<{ side: string, phase: number, key: string, counted: number | null, admitted: number, note: string }>}
 */
const usageReads = [];
async function readUsage() {
  const side = serving?.release.label ?? "none";
  const today = new Date().toISOString().slice(0, 10);
  for (const key of keys) {
    const res = await fetch(`${url}/admin/v1/keys/${key.id}`, {
      headers: { Authorization: `Bearer ${adminToken}` },
    }).catch(() => null);
    const body = /** @type {{ usage?: { day?: { count?: number } } | null, code?: string }} */ (
      res ? await res.json().catch(() => ({})) : {}
    );
    const counted = typeof body.usage?.day?.count === "number" ? body.usage.day.count : null;
    const admitted = answers.filter(
      (a) => a.key === key.name && a.status === 200 && dayOf(a.at) === today,
    ).length;
    const note = res
      ? res.status === 200
        ? body.usage
          ? ""
          : "usage: null (the key's quota object could not be reached)"
        : `${res.status} ${body.code ?? ""}`
      : "no answer";
    usageReads.push({ side, phase, key: key.name, counted, admitted, note });
    say(
      `usage of ${key.name} (admin API of ${side}): ${counted ?? "—"} counted today, ${admitted} admitted${note ? `; ${note}` : ""}`,
    );
  }
}

const dayOf = (/** @type {number} */ t) => new Date(t).toISOString().slice(0, 10);
const minuteOf = (/** @type {number} */ t) => new Date(t).toISOString().slice(0, 16);

// ------------------------------------------------------------------ the rehearsal
// A run that would cross UTC midnight would split the day window it checks: start in a new day.
const leftToday = 86_400_000 - (Date.now() % 86_400_000);
if (leftToday < 5 * 60_000) {
  console.log(`Waiting ${Math.ceil(leftToday / 1000)} s for the next UTC day…`);
  await new Promise((r) => setTimeout(r, leftToday + 1000));
}

const started = Date.now();
console.log(
  `Rollback rehearsal: current ${current.short}${current.commit.endsWith("+changes") ? " (with uncommitted changes)" : ""} (${path.relative(ROOT, current.dir) || "this checkout"})` +
    ` → previous ${previous.short} (${path.relative(ROOT, previous.dir)})\nshared state: ${shared}`,
);

const TINY = { perMinute: 10, perDay: 10 };

console.log(`\n== 0. previous (${previous.short}) serves: before the upgrade`);
await serve(previous, { migrate: true });
const prevFree = await issue("prev-free", "free");
const prevTiny = await issue("prev-tiny", "enterprise", TINY);
await send(prevFree, 3);
await send(prevTiny, 3);

console.log(`\n== 1. current (${current.short}) serves: the upgrade`);
phase = 1;
await switchWithTraffic([prevFree], () => serve(current, { migrate: true }));
const curFree = await issue("cur-free", "free");
const curTiny = await issue("cur-tiny", "enterprise", TINY);
await send(prevFree, 3);
await send(curFree, 3);
await send(prevTiny, 10); // 7 left today, then refused: its day is used up on this side
await send(curTiny, 4);
await readUsage();

console.log(`\n== 2. previous (${previous.short}) serves: the rollback`);
phase = 2;
await switchWithTraffic([prevFree, curFree], () => serve(previous));
const prevFree2 = await issue("prev-free-2", "free");
await send(prevFree, 3);
await send(curFree, 3);
await send(prevFree2, 3);
await send(prevTiny, 3); // used up on the other side: refused here
await send(curTiny, 9); // 6 left today, then refused: used up on this side
await readUsage();

console.log(`\n== 3. current (${current.short}) serves: rolled forward`);
phase = 3;
await switchWithTraffic([prevFree, curFree, prevFree2], () => serve(current, { migrate: true }));
for (const key of [prevFree, curFree, prevFree2]) await send(key, 3);
await send(prevTiny, 2);
await send(curTiny, 3); // used up on the other side: refused here
await readUsage();
await stopServing();

// ------------------------------------------------------------------ the verdict
/** @type {string[]} */
const failures = [];
const sides = ["previous", "current"];

// Every key works on both sides: each side answered it, and never with 401/403 or a 5xx.
for (const key of keys) {
  for (const side of sides) {
    const got = answers.filter((a) => a.key === key.name && a.side === side && a.status);
    if (got.length === 0) {
      failures.push(`${key.name} (issued by ${key.issuedBy}) was never answered by ${side}`);
      continue;
    }
    const bad = got.filter((a) => a.status !== 200 && a.status !== 429);
    if (bad.length) {
      const kinds = [...new Set(bad.map((a) => `${a.status} ${a.code}`))].join(", ");
      failures.push(
        `${key.name} (${key.format} key issued by ${key.issuedBy}) does not work on ${side} (${side === "previous" ? previous.short : current.short}): ${bad.length} of ${got.length} answers were ${kinds}`,
      );
    }
  }
}

// No window admits past its limit.
for (const key of keys) {
  const admitted = answers.filter((a) => a.key === key.name && a.status === 200);
  for (const [window, of, limit] of /** @type {const} */ ([
    ["day", dayOf, key.limits.perDay],
    ["minute", minuteOf, key.limits.perMinute],
  ])) {
    /** @type {Map<string, number>} */
    const per = new Map();
    for (const a of admitted) per.set(of(a.at), (per.get(of(a.at)) ?? 0) + 1);
    for (const [when, count] of per)
      if (count > limit)
        failures.push(
          `${key.name}: ${count} requests admitted in the ${window} ${when} (its limit: ${limit}/${window}); ` +
            `admitted by ${[...new Set(admitted.filter((a) => of(a.at) === when).map((a) => a.side))].join(" and ")}`,
        );
  }
}

// Every admitted request is counted (the day's usage, read through each side's admin API).
for (const read of usageReads) {
  if (read.counted === null)
    failures.push(
      `${read.key}: the admin API of ${read.side} could not read its usage (${read.note || "no count"})`,
    );
  else if (read.counted < read.admitted)
    failures.push(
      `${read.key}: ${read.admitted} admitted today but ${read.counted} counted (admin API of ${read.side}, after step ${read.phase}): ${read.admitted - read.counted} served and not counted`,
    );
}

// A day quota used up on one side is refused on the other.
for (const [key, usedUpOn, checkedOn] of /** @type {const} */ ([
  [prevTiny, 1, 2],
  [curTiny, 2, 3],
])) {
  const usedUp = answers.some(
    (a) => a.key === key.name && a.phase === usedUpOn && a.status === 429,
  );
  const later = answers.filter((a) => a.key === key.name && a.phase === checkedOn && a.status);
  const admittedLater = later.filter((a) => a.status === 200).length;
  if (!usedUp)
    failures.push(`${key.name}: its day quota was never refused in step ${usedUpOn} (not used up)`);
  else if (admittedLater)
    failures.push(
      `${key.name}: its day quota, used up in step ${usedUpOn}, still admitted ${admittedLater} of ${later.length} requests in step ${checkedOn} (${later[0]?.side})`,
    );
}

console.log("\n== What each release says it reads and writes");
for (const side of /** @type {const} */ (["previous", "current"])) {
  const m = manifests[side];
  const r = side === "previous" ? previous : current;
  console.log(
    m
      ? `  ${side} ${r.short} (${m.source}): keys read ${m.manifest.keys.reads.join(", ")}, write ${m.manifest.keys.writes.join(", ")}; ` +
          `objects ${Object.entries(m.manifest.objects)
            .map(([name, o]) => `${name} writes v${o.writes} reads ≤ v${o.readsThrough}`)
            .join(", ")}; D1 through ${m.manifest.d1.migrations.at(-1)}`
      : `  ${side} ${r.short}: no compatibility record (neither compat/release.json nor a fixture)`,
  );
}

for (const side of /** @type {const} */ (["previous", "current"])) {
  const lines = [...serverErrors[side]];
  if (lines.length) {
    console.log(
      `\n== Errors in the log of ${side} (${side === "previous" ? previous.short : current.short}), first 8 of ${lines.length}`,
    );
    for (const line of lines.slice(0, 8)) console.log(`  ${line}`);
  }
}

const total = answers.filter((a) => a.status).length;
const seconds = Math.round((Date.now() - started) / 1000);
console.log(
  `\n== Verdict: rollback ${current.short} → ${previous.short} (and forward again), ${keys.length} keys, ${total} requests answered, ${seconds} s`,
);
const check = (/** @type {string} */ name, /** @type {RegExp} */ about) => {
  const mine = failures.filter((f) => about.test(f));
  console.log(`  ${mine.length ? "✗" : "✓"} ${name}${mine.length ? ` (${mine.length})` : ""}`);
  for (const f of mine) console.log(`      ${f}`);
};
check("every key works on both sides", /does not work on|never answered/);
check("no window admits past its limit", /admitted in the (day|minute)/);
check("every admitted request is counted", /counted|could not read its usage/);
check("a day quota used up on one side holds on the other", /day quota/);
// Counted and not served is allowed (never past a limit): permits a holder had in stock when its
// release stopped are billed as stranded (docs/quotas.md).
const last = usageReads.filter((r) => r.phase === 3 && r.counted !== null);
const unserved = last.filter((r) => /** @type {number} */ (r.counted) > r.admitted);
if (unserved.length)
  console.log(
    `  · counted and not served (permits stranded in a stock at a switch): ${unserved
      .map((r) => `${r.key} ${/** @type {number} */ (r.counted) - r.admitted}`)
      .join(", ")}`,
  );
cleanupNow();
if (failures.length) {
  console.log(
    `\n✗ REHEARSAL FAILED: rolling back from ${current.short} to ${previous.short} is not safe (${failures.length} problem(s) above).`,
  );
  process.exit(1);
}
console.log(
  `\n✓ REHEARSAL PASSED: rolling back from ${current.short} to ${previous.short} is safe.`,
);
