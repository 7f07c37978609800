// @ts-check
// npm run deploy:* and npm run rollback without a Cloudflare account: a stand-in `wrangler` on PATH
// (e2e/fixtures/stand-in-wrangler.mjs) records every call and fails where it is told to; the smoke
// test runs against the API under `wrangler dev`, which the environment's PUBLIC_ORIGIN names. Each
// run happens in a git copy of the project (wrangler.toml edited per case) whose `npm test` passes
// or fails as the case needs.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { releaseManifestAt, unreadableByTarget } from "../scripts/lib/compat.mjs";
import {
  addressProblem,
  bakeSmokeTimesOf,
  compatibilityDateProblem,
  DEFAULT_BAKE_MS,
  DEFAULT_SMOKE_EVERY_MS,
  durationMsOf,
  formatDuration,
  pendingMigrationsOf,
  routeHostsOf,
  stableVersionOf,
} from "../scripts/lib/deploy-checks.mjs";
import { listenOnFreePort, localApiForTests, ROOT } from "./helpers.mjs";

const SERVING = "11111111-aaaa-4aaa-8aaa-111111111111";
const BEFORE = "33333333-cccc-4ccc-8ccc-333333333333";
const NEW = "22222222-bbbb-4bbb-8bbb-222222222222";
// Nothing listens on the discard port: a smoke test against it fails at its first check.
const NOT_ANSWERING = "http://127.0.0.1:9";

describe("deploy decisions", () => {
  it("route hosts, from patterns and custom domains", () => {
    assert.deepEqual(
      routeHostsOf({
        routes: [
          "api.animal-store.dev/*",
          { pattern: "pets.animal-store.dev", custom_domain: true },
          { pattern: "https://*.animal-store.dev/v1/*", zone_name: "animal-store.dev" },
        ],
      }),
      ["api.animal-store.dev", "pets.animal-store.dev", "animal-store.dev"],
    );
    assert.deepEqual(routeHostsOf({ route: "a.example.org/*" }), ["a.example.org"]);
  });

  it("production needs a route serving PUBLIC_ORIGIN; staging may use workers.dev", () => {
    const origin = "https://api.animal-store.dev";
    assert.match(
      addressProblem("production", { workers_dev: true }, origin) ?? "",
      /no route or custom domain/,
    );
    assert.equal(
      addressProblem("production", { routes: [{ pattern: "api.animal-store.dev" }] }, origin),
      null,
    );
    assert.match(
      addressProblem("production", { routes: ["other.animal-store.dev/*"] }, origin) ?? "",
      /not served by/,
    );
    assert.equal(
      addressProblem("staging", { workers_dev: true }, "https://s.ops.workers.dev"),
      null,
    );
    assert.match(
      addressProblem("staging", { workers_dev: false }, origin) ?? "",
      /workers_dev is off/,
    );
  });

  it("compatibility date: at most the runtime's, not in the future", () => {
    assert.equal(compatibilityDateProblem("2026-10-01", "2026-10-23", "2026-11-24"), null);
    assert.match(
      compatibilityDateProblem("2026-10-24", "2026-10-23", "2026-11-24") ?? "",
      /newer than the pinned runtime/,
    );
    assert.match(
      compatibilityDateProblem("2026-10-20", "2026-10-23", "2026-10-19") ?? "",
      /in the future/,
    );
    assert.match(compatibilityDateProblem(undefined, "2026-10-23", "2026-11-24") ?? "", /unset/);
  });

  it("the stable version is the one with most traffic; pending migrations are listed", () => {
    assert.equal(
      stableVersionOf({
        versions: [
          { version_id: "new", percentage: 10 },
          { version_id: "old", percentage: 90 },
        ],
      }),
      "old",
    );
    assert.equal(stableVersionOf(null), null);
    assert.deepEqual(pendingMigrationsOf("✅ No migrations to apply!"), []);
    assert.deepEqual(
      pendingMigrationsOf("│ 0006_more.sql │\n│ 0007_even_more.sql │\n│ 0006_more.sql │"),
      ["0006_more.sql", "0007_even_more.sql"],
    );
  });
});

describe("the bake between the canary and 100 %", () => {
  it("durations: whole seconds or minutes, or 0; anything else is refused", () => {
    assert.equal(durationMsOf("0"), 0);
    assert.equal(durationMsOf("90s"), 90_000);
    assert.equal(durationMsOf("5m"), 300_000);
    for (const bad of ["", "5", "0s", "05m", "1h", "1.5m", "-5m", "5 m", "m"])
      assert.equal(durationMsOf(bad), null, bad);
    assert.equal(formatDuration(300_000), "5m");
    assert.equal(formatDuration(90_000), "1m 30s");
    assert.equal(formatDuration(4000), "4s");
  });

  it("production bakes 5 minutes by default and staging 1; the smoke test runs every interval and at the end", () => {
    assert.deepEqual(DEFAULT_BAKE_MS, { production: 300_000, staging: 60_000 });
    // The runbook states the same defaults.
    const minutes = (ms) => `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}`;
    const operations = readFileSync(path.join(ROOT, "docs/operations.md"), "utf8").replace(
      /\s+/g,
      " ",
    );
    assert.ok(
      operations.includes(
        `(default ${minutes(DEFAULT_BAKE_MS.production)} in production, ${minutes(DEFAULT_BAKE_MS.staging)} in staging;`,
      ),
    );
    assert.ok(operations.includes(`(default ${DEFAULT_SMOKE_EVERY_MS / 1000} seconds)`));
    assert.deepEqual(
      bakeSmokeTimesOf(300_000, 30_000),
      [30_000, 60_000, 90_000, 120_000, 150_000, 180_000, 210_000, 240_000, 270_000, 300_000],
    );
    assert.deepEqual(bakeSmokeTimesOf(70_000, 30_000), [30_000, 60_000, 70_000]);
    assert.deepEqual(bakeSmokeTimesOf(10_000, 30_000), [10_000]);
    assert.deepEqual(bakeSmokeTimesOf(0, 30_000), []);
  });
});

describe("the deploy workflow (.github/workflows/deploy.yml)", () => {
  const workflow = readFileSync(path.join(ROOT, ".github/workflows/deploy.yml"), "utf8");
  /** The text of the job `name` (from its key to the next job's). */
  const job = (name) => {
    const start = workflow.indexOf(`\n  ${name}:\n`);
    assert.ok(start >= 0, `job ${name}`);
    const next = workflow.slice(start + 1).search(/\n {2}[a-z-]+:\n/);
    return next < 0 ? workflow.slice(start) : workflow.slice(start, start + 1 + next);
  };

  it("runs the tests once per deploy: in the test job, which both deploys need and do not repeat", () => {
    assert.match(job("test"), /run: bash \.ci\/run\n/);
    for (const [name, env] of [
      ["staging", "staging"],
      ["production", "production"],
    ]) {
      const text = job(name);
      assert.match(text, /\n {4}needs: test\n/, name);
      assert.match(text, new RegExp(`run: npm run deploy:${env} -- --yes --skip-tests\\n`), name);
      assert.doesNotMatch(text, /npm (run )?test|\.ci\/run/, name);
    }
  });

  it("rehearses the rollback once per commit: in the test job (.ci/run), not again before production", () => {
    const ci = readFileSync(path.join(ROOT, ".ci/run"), "utf8");
    assert.match(ci, /^npm run -s rehearse:rollback$/m);
    assert.match(job("test"), /run: bash \.ci\/run\n/);
    for (const name of ["staging", "production"]) {
      const text = job(name);
      assert.match(text, /\n {4}needs: test\n/, name);
      assert.doesNotMatch(text, /rehearse:rollback|rehearse-rollback/, name);
    }
  });
});

describe("--help and usage errors", () => {
  const script = (name, args) =>
    spawnSync(process.execPath, [`scripts/${name}`, ...args], { cwd: ROOT, encoding: "utf8" });

  for (const [name, usage] of /** @type {Array<[string, RegExp]>} */ ([
    ["deploy.mjs", /^Usage: npm run deploy:staging\|deploy:production -- /],
    ["rollback.mjs", /^Usage: npm run rollback -- staging\|production/],
    ["set-secrets.mjs", /^Usage: <JSON object> \| npm run set-secrets -- staging\|production/],
  ])) {
    it(`${name}: --help and -h print the usage and exit 0, with or without an environment`, () => {
      for (const args of [["--help"], ["-h"], ["staging", "--help"]]) {
        const run = script(name, args);
        assert.equal(run.status, 0, `${args.join(" ")}: ${run.stdout}${run.stderr}`);
        assert.match(run.stdout, usage);
        assert.match(run.stdout, /--help, -h/);
        assert.match(run.stdout, /--yes/);
        assert.equal(run.stderr, "");
      }
    });

    it(`${name}: an unknown option prints what is wrong and the usage, and exits 2`, () => {
      const run = script(name, ["staging", "--bogus"]);
      assert.equal(run.status, 2);
      assert.match(run.stderr, /Unknown option '--bogus'/);
      // The usage follows the error, on a line of its own.
      assert.match(run.stderr, new RegExp(`\\n${usage.source.slice(1)}`));
      assert.equal(run.stdout, "");
    });
  }
});

describe("deploy.mjs: the bake and test options", () => {
  const deployScript = (args) =>
    spawnSync(process.execPath, ["scripts/deploy.mjs", ...args], { cwd: ROOT, encoding: "utf8" });

  it("--help names --bake, its defaults, --smoke-every and --skip-tests", () => {
    const help = deployScript(["--help"]);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /--bake DURATION .*\n.*\(default 5m in production, 1m in staging\)/);
    assert.match(help.stdout, /--smoke-every DURATION .*\(default 30s\)/);
    assert.match(help.stdout, /--skip-tests/);
  });

  it("a malformed --bake or --smoke-every, or either with --all-at-once, exits 2 before any work", () => {
    for (const [args, message] of /** @type {Array<[string[], RegExp]>} */ ([
      [["--bake", "5"], /--bake 5: whole seconds or minutes/],
      [["--bake", "1h"], /--bake 1h: whole seconds or minutes/],
      [["--smoke-every", "0"], /--smoke-every 0: whole seconds or minutes .*more than 0/],
      [["--bake", "1m", "--all-at-once"], /--bake and --all-at-once exclude each other/],
      [
        ["--smoke-every", "5s", "--all-at-once"],
        /--smoke-every and --all-at-once exclude each other/,
      ],
    ])) {
      const run = deployScript(["staging", ...args]);
      assert.equal(run.status, 2, args.join(" "));
      assert.match(run.stderr, message);
      assert.equal(run.stdout, "");
    }
  });
});

describe("what each release reads and writes (compat/)", () => {
  const fixture = (name) =>
    JSON.parse(readFileSync(path.join(ROOT, "compat/before-manifest", `${name}.json`), "utf8"));

  it("420f69a cannot read what abaefec writes: routed keys and the limiter's schema 10", () => {
    const problems = unreadableByTarget(fixture("abaefec"), fixture("420f69a"));
    assert.equal(problems.length, 2, problems.join("\n"));
    assert.match(problems[0], /API keys in the format routed: .*refused \(401\)/);
    assert.match(problems[1], /QuotaLimiter storage at schema version 10: .* up to 4 only/);
    assert.deepEqual(unreadableByTarget(fixture("420f69a"), fixture("abaefec")), []);
  });

  it("this release is safe to roll back to the release it records as previous", () => {
    const current = releaseManifestAt("HEAD", ROOT, ROOT);
    assert.ok(current, "compat/release.json");
    const previousRelease = current.manifest.previousRelease;
    assert.match(previousRelease ?? "", /^[0-9a-f]{40}$/);
    assert.ok(previousRelease);
    const previous = releaseManifestAt(previousRelease, undefined, ROOT);
    assert.ok(previous, `a record of ${previousRelease}`);
    assert.deepEqual(unreadableByTarget(current.manifest, previous.manifest), []);
  });

  it("npm run rehearse:rollback: --help, and a previous release that is not a commit, before any work", () => {
    const rehearse = (...args) =>
      spawnSync(process.execPath, ["scripts/rehearse-rollback.mjs", ...args], {
        cwd: ROOT,
        encoding: "utf8",
      });
    const help = rehearse("--help");
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /--previous <commit>[\s\S]*--current <commit\|worktree>/);
    const bad = rehearse("--previous", "not-a-commit-anywhere");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--previous not-a-commit-anywhere is not a commit of this repository/);
    const unknown = rehearse("--everything");
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /Usage: npm run rehearse:rollback/);
  });

  it("a contracting D1 migration, a cursor or bookmark format the target lacks, are named", () => {
    const base = fixture("abaefec");
    const next = structuredClone(base);
    next.d1.migrations.push("0013_drop_old.sql");
    next.d1.contract.push("0013_drop_old.sql");
    next.cursors.writes = ["pets-v2", "admin-v1"];
    next.bookmarks.writes = ["signed-v2"];
    const problems = unreadableByTarget(next, base);
    assert.equal(problems.length, 3, problems.join("\n"));
    assert.match(problems[0], /page cursors in the format pets-v2/);
    assert.match(problems[1], /D1 bookmarks in the format signed-v2/);
    assert.match(problems[2], /D1 after 0013_drop_old\.sql/);
  });
});

describe("npm run deploy:* and npm run rollback, with a stand-in wrangler", () => {
  const server = localApiForTests();
  let work;
  let bin;
  before(() => {
    work = mkdtempSync(path.join(tmpdir(), "animal-store-deploy-test-"));
    bin = path.join(work, "bin");
    mkdirSync(bin);
    const shim = path.join(bin, "wrangler");
    writeFileSync(
      shim,
      `#!/bin/sh\nexec "${process.execPath}" "${path.join(ROOT, "e2e/fixtures/stand-in-wrangler.mjs")}" "$@"\n`,
    );
    chmodSync(shim, 0o755);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  /**
   * A committed git copy of the project's deploy inputs, with wrangler.toml as `edit` makes it
   * and an `npm test` that exits `testsExit`.
   */
  function project({ edit = (t) => t, testsExit = 0 } = {}) {
    const dir = mkdtempSync(path.join(work, "project-"));
    writeFileSync(
      path.join(dir, "wrangler.toml"),
      edit(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8")),
    );
    cpSync(path.join(ROOT, "scripts"), path.join(dir, "scripts"), { recursive: true });
    cpSync(path.join(ROOT, "compat"), path.join(dir, "compat"), { recursive: true });
    symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
    writeFileSync(
      path.join(dir, "package.json"),
      JSON.stringify({
        name: "deploy-test-project",
        private: true,
        type: "module",
        scripts: { test: `node -e "process.exit(${testsExit})"` },
      }),
    );
    writeFileSync(path.join(dir, ".gitignore"), "node_modules\n");
    const git = (...args) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: dir });
    git("init", "-q");
    git("add", "-A");
    git("commit", "-qm", "project");
    return dir;
  }

  /**
   * Commits, in the project `dir`, a release whose compat/release.json is the current one as
   * `edit` makes it, then the current one again; returns the earlier release's commit.
   */
  function earlierRelease(dir, edit) {
    const file = path.join(dir, "compat/release.json");
    const now = readFileSync(file, "utf8");
    const git = (...args) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
        cwd: dir,
        encoding: "utf8",
      }).trim();
    writeFileSync(file, JSON.stringify(edit(JSON.parse(now)), null, 2));
    git("commit", "-qam", "earlier release");
    const commit = git("rev-parse", "HEAD");
    writeFileSync(file, now);
    git("commit", "-qam", "this release");
    return commit;
  }
  /** A release before the routed keys and the limiter's schema 10. */
  const beforeRoutedKeys = (m) => ({
    ...m,
    keys: { reads: ["plain"], writes: ["plain"] },
    objects: { ...m.objects, QuotaLimiter: { writes: 4, readsThrough: 4 } },
  });

  /**
   * wrangler.toml with real ids, and staging served at `origin` (its PUBLIC_ORIGIN, and a route
   * for its host).
   */
  const configured =
    (origin = server.api.url) =>
    (toml) =>
      toml
        .replace(/database_id = "[^"]+"/g, () => `database_id = "${randomUUID()}"`)
        .replace(
          /(\[env\.staging\]\nname = "[^"]+"\n)/,
          `$1routes = [{ pattern = "${new URL(origin).hostname}", custom_domain = true }]\n`,
        )
        .replace(
          /(\[env\.staging\.vars\][^[]*?)PUBLIC_ORIGIN = "[^"]*"/,
          `$1PUBLIC_ORIGIN = "${origin}"`,
        );

  /**
   * Runs a script of the project in `dir` with the stand-in first on PATH; resolves with its
   * result and calls. `env` overrides the child's environment (undefined: unset), `onStdout` sees
   * the output so far as it grows, `input` is written to its standard input.
   * @param {string} dir
   * @param {string} script
   * @param {string[]} args
   * @param {{ standIn?: Record<string, string>, env?: Record<string, string | undefined>,
   *   onStdout?: (stdout: string, child: import("node:child_process").ChildProcess) => void,
   *   input?: string }} [options]
   * @returns {Promise<{ status: number | null, stdout: string, stderr: string, calls: string[] }>}
   */
  function run(dir, script, args, { standIn = {}, env = {}, onStdout = () => {}, input } = {}) {
    const log = path.join(work, `calls-${randomUUID()}.ndjson`);
    /** @type {NodeJS.ProcessEnv} */
    const childEnv = {
      ...process.env,
      PATH: `${bin}${path.delimiter}${process.env.PATH}`,
      HOME: dir,
      ADMIN_TOKEN: server.api.adminToken,
      STAND_IN_LOG: log,
      ...standIn,
      ...env,
    };
    delete childEnv.CLOUDFLARE_API_TOKEN;
    for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name];
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [`scripts/${script}`, ...args], {
        cwd: dir,
        env: childEnv,
        stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      });
      if (input !== undefined) child.stdin?.end(input);
      let stdout = "";
      let stderr = "";
      child.stdout?.on("data", (d) => {
        stdout += d;
        onStdout(stdout, child);
      });
      child.stderr?.on("data", (d) => (stderr += d));
      child.on("exit", (status) => {
        const calls = existsSync(log)
          ? readFileSync(log, "utf8")
              .split("\n")
              .filter(Boolean)
              .map((line) => JSON.parse(line).join(" "))
          : [];
        resolve({ status, stdout, stderr, calls });
      });
    });
  }
  /**
   * Runs the deploy script. No bake unless the case asks for one (`--bake`): a bake waits, and
   * only the cases about it need the time.
   */
  const deploy = (dir, args, options) =>
    run(
      dir,
      "deploy.mjs",
      args.some((a) => a === "--bake" || a === "--all-at-once") ? args : [...args, "--bake", "0"],
      options,
    );
  /** The smoke keys of the API under wrangler dev, by name: [name, status] pairs. */
  async function smokeKeys() {
    const res = await fetch(`${server.api.url}/admin/v1/keys?q=smoke&limit=100`, {
      headers: { Authorization: `Bearer ${server.api.adminToken}` },
    });
    assert.equal(res.status, 200);
    const { data } = /** @type {{ data: Array<{ name: string, status: string }> }} */ (
      await res.json()
    );
    return data.map((k) => [k.name, k.status]);
  }
  /**
   * A proxy to the API under wrangler dev that answers 503 to everything once `fail()` is called:
   * an environment that breaks while the canary bakes.
   */
  async function breakableProxy() {
    let failing = false;
    const proxy = createServer(async (req, res) => {
      if (failing) {
        res.writeHead(503, { "Content-Type": "text/plain" }).end("broken on purpose");
        return;
      }
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      /** @type {Record<string, string>} */
      const headers = {};
      for (const [name, value] of Object.entries(req.headers))
        if (name !== "host" && value !== undefined)
          headers[name] = Array.isArray(value) ? value.join(", ") : value;
      const answer = await fetch(`${server.api.url}${req.url}`, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
        redirect: "manual",
      });
      const out = Object.fromEntries(answer.headers);
      // fetch has decoded the body already.
      delete out["content-encoding"];
      delete out["content-length"];
      res.writeHead(answer.status, out).end(Buffer.from(await answer.arrayBuffer()));
    });
    const port = await listenOnFreePort(proxy);
    return {
      url: `http://127.0.0.1:${port}`,
      fail: () => {
        failing = true;
      },
      close: () => new Promise((resolve) => proxy.close(resolve)),
    };
  }
  /** The calls that changed something remote (everything but the reads). */
  const changes = (calls) =>
    calls.filter(
      (c) =>
        /^(d1 migrations apply|versions upload|versions deploy|deploy|rollback)\b/.test(c) ||
        /^secret put/.test(c),
    );

  it("staging, all well: migrations previewed and applied, uploaded, 10 %, smoke test, 100 %, smoke test", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_PENDING: "0006_more.sql" },
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.deepEqual(
      r.calls.map((c) =>
        c.replace(/ --env staging$/, "").replace(/--message deploy \S+/, "--message …"),
      ),
      [
        "whoami --json",
        "secret list --format json",
        "deployments status --json",
        `versions view ${SERVING} --json`,
        "d1 migrations list DB --remote",
        "d1 migrations apply DB --remote",
        `versions upload --tag ${r.calls.find((c) => c.startsWith("versions upload"))?.split(" ")[3]} --message …`,
        `versions deploy ${NEW}@10 ${SERVING}@90 --yes --message …`,
        `versions deploy ${NEW}@100 --yes --message …`,
      ],
    );
    assert.ok(r.calls.every((c) => c.endsWith("--env staging")));
    assert.match(r.stdout, /0006_more\.sql/);
    assert.match(r.stdout, /✓ tests green/);
    assert.match(r.stdout, new RegExp(`✓ ${SERVING} reads what this release writes`));
    // The smoke test ran twice (pinned to the new version, then at 100 %), all checks passing.
    assert.equal(r.stdout.match(/✓ disable the smoke key/g)?.length, 2);
    // One reused key, disabled between runs; not one revoked key per run.
    assert.deepEqual(
      (await smokeKeys()).filter(([name]) => name === "smoke-deploy"),
      [["smoke-deploy", "disabled"]],
    );
    assert.match(
      r.stdout,
      new RegExp(`${NEW} \\(\\w+\\) serves all traffic; before it: ${SERVING}`),
    );
  });

  it("--percentage sets the canary's share", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes", "--percentage", "25"]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.ok(r.calls.some((c) => c.startsWith(`versions deploy ${NEW}@25 ${SERVING}@75 `)));
    const bad = await deploy(dir, ["staging", "--percentage", "100"]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /an integer from 1 to 99/);
  });

  it("not logged in: stops after whoami, saying how to log in", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], { standIn: { STAND_IN_FAIL: "whoami" } });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /not logged in/);
    assert.match(r.stderr, /CLOUDFLARE_API_TOKEN/);
    assert.deepEqual(r.calls, ["whoami --json --env staging"]);
  });

  it("a missing secret stops the deploy, naming it and how to set it", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_SECRETS: "ADMIN_TOKENS" },
    });
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      /missing secret\(s\) CURSOR_SECRET, KEY_TAG_SECRET, WEBHOOK_ENCRYPTION_KEY/,
    );
    // The Worker exists: a new version with the secret, not one deployed to all traffic at once.
    assert.match(r.stderr, /npm run wrangler -- versions secret put CURSOR_SECRET --env staging/);
    assert.match(r.stderr, /npm run wrangler -- versions secret put KEY_TAG_SECRET --env staging/);
    assert.match(
      r.stderr,
      /npm run wrangler -- versions secret put WEBHOOK_ENCRYPTION_KEY --env staging/,
    );
    assert.match(r.stderr, /this deploy's upload carries it/);
    assert.deepEqual(changes(r.calls), []);

    // No Worker yet: `secret put`, which creates it.
    const none = await deploy(dir, ["staging", "--yes"], { standIn: { STAND_IN_WORKER: "none" } });
    assert.equal(none.status, 1);
    assert.match(
      none.stderr,
      /missing secret\(s\) ADMIN_TOKEN, CURSOR_SECRET, KEY_TAG_SECRET, WEBHOOK_ENCRYPTION_KEY/,
    );
    assert.match(none.stderr, /npm run wrangler -- secret put ADMIN_TOKEN --env staging/);
    assert.doesNotMatch(none.stderr, /versions secret put/);
  });

  it("without ADMIN_TOKEN for the smoke test, nothing changes", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], { env: { ADMIN_TOKEN: undefined } });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /set ADMIN_TOKEN to staging's admin token/);
    assert.deepEqual(changes(r.calls), []);
  });

  it("pending migrations are shown and, with no terminal and no --yes, not applied", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging"], { standIn: { STAND_IN_PENDING: "0006_more.sql" } });
    assert.equal(r.status, 1);
    assert.match(r.stdout, /Migrations to be applied:[\s\S]*0006_more\.sql/);
    assert.match(
      r.stderr,
      /Apply 1 migration\(s\) to animal-store-staging \(staging\): 0006_more\.sql\? Not asked \(no terminal\): pass --yes/,
    );
    assert.deepEqual(changes(r.calls), []);
  });

  it("--bake: the canary serves while the smoke test passes every --smoke-every, then 100 %", async () => {
    const dir = project({ edit: configured() });
    const started = Date.now();
    const r = await deploy(dir, ["staging", "--yes", "--bake", "3s", "--smoke-every", "1s"]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.ok(Date.now() - started >= 3000, "the bake waited");
    assert.match(
      r.stdout,
      new RegExp(`== Bake: ${NEW} at 10 % for 3s, smoke test every 1s \\(3 runs\\)`),
    );
    for (const [i, at] of ["1s", "2s", "3s"].entries())
      assert.match(r.stdout, new RegExp(`… ${at} of 3s: smoke test ${i + 1} of 3\\n`));
    assert.match(r.stdout, /✓ baked 3s: 3 smoke tests passed/);
    // Canary, three during the bake, at 100 %.
    assert.equal(r.stdout.match(/✓ disable the smoke key/g)?.length, 5);
    // The promotion comes after the bake.
    assert.ok(r.stdout.indexOf("✓ baked") < r.stdout.indexOf(`== Promote ${NEW} to 100 %`));
    assert.deepEqual(
      changes(r.calls).map((c) => c.split(" --")[0]),
      ["versions upload", `versions deploy ${NEW}@10 ${SERVING}@90`, `versions deploy ${NEW}@100`],
    );
  });

  it("--bake: a smoke test that fails mid-bake rolls back, and nothing reaches 100 %", async () => {
    const proxy = await breakableProxy();
    try {
      const dir = project({ edit: configured(proxy.url) });
      const r = await deploy(dir, ["staging", "--yes", "--bake", "5s", "--smoke-every", "1s"], {
        // The first smoke test of the bake passed: the environment breaks before the second.
        onStdout: (out) => {
          const bake = out.indexOf("smoke test 1 of 5");
          if (bake >= 0 && out.indexOf("✓ disable the smoke key", bake) >= 0) proxy.fail();
        },
      });
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(
        r.stderr,
        /✗ smoke test during the bake failed \(2s after the canary went live\): OpenAPI document: expected 200, got 503/,
      );
      assert.doesNotMatch(r.stdout, /smoke test 3 of 5/);
      assert.match(r.stderr, new RegExp(`rolled back: ${SERVING} serves all traffic again`));
      assert.deepEqual(
        changes(r.calls).map((c) => c.split(" --")[0]),
        ["versions upload", `versions deploy ${NEW}@10 ${SERVING}@90`, `rollback ${SERVING}`],
      );
    } finally {
      await proxy.close();
    }
  });

  it("--bake: interrupted during the bake (Ctrl-C, a cancelled job), it rolls back", async () => {
    const dir = project({ edit: configured() });
    let interrupted = false;
    const r = await deploy(dir, ["staging", "--yes", "--bake", "1m"], {
      onStdout: (out, child) => {
        if (!interrupted && out.includes("== Bake:")) {
          interrupted = true;
          child.kill("SIGINT");
        }
      },
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /✗ interrupted \(SIGINT\) during the bake/);
    assert.deepEqual(
      changes(r.calls).map((c) => c.split(" --")[0]),
      ["versions upload", `versions deploy ${NEW}@10 ${SERVING}@90`, `rollback ${SERVING}`],
    );
  });

  it("--skip-tests: the tests are not run (CI ran them in its test job); the clean-tree check stays", async () => {
    const red = project({ edit: configured(), testsExit: 1 });
    const r = await deploy(red, ["staging", "--yes", "--skip-tests"]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /! --skip-tests: the tests were not run here/);
    assert.doesNotMatch(r.stdout, /npm test/);
    writeFileSync(path.join(red, "wrangler.toml"), "# edit\n", { flag: "a" });
    const dirty = await deploy(red, ["staging", "--yes", "--skip-tests"]);
    assert.equal(dirty.status, 1);
    assert.match(dirty.stderr, /uncommitted changes/);
    assert.deepEqual(dirty.calls, []);
  });

  it("a failed migration stops the deploy before any upload", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_PENDING: "0006_more.sql", STAND_IN_FAIL: "migrations-apply" },
    });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /the migrations of DB failed/);
    assert.deepEqual(changes(r.calls), ["d1 migrations apply DB --remote --env staging"]);
  });

  it("a failed upload deploys nothing", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_FAIL: "versions-upload" },
    });
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      new RegExp(`the upload failed .*Nothing was deployed: ${SERVING} still serves all traffic`),
    );
    assert.equal(changes(r.calls).length, 1);
    assert.match(changes(r.calls)[0], /^versions upload /);
  });

  it("a failed smoke test of the new version rolls back to the version before, and exits 1", async () => {
    const dir = project({ edit: configured(NOT_ANSWERING) });
    const r = await deploy(dir, ["staging", "--yes"]);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /smoke test of the new version failed: OpenAPI document: .* did not answer/,
    );
    assert.match(r.stderr, new RegExp(`rolled back: ${SERVING} serves all traffic again`));
    const made = changes(r.calls);
    assert.equal(made.length, 3, made.join("\n"));
    assert.match(made[1], new RegExp(`^versions deploy ${NEW}@10 ${SERVING}@90 `));
    assert.match(made[2], new RegExp(`^rollback ${SERVING} --yes --message `));
    assert.ok(!made.some((c) => c.includes("@100")));
  });

  it("a failed canary deploy changes nothing to roll back; a failed promotion rolls back", async () => {
    const dir = project({ edit: configured() });
    const canary = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_FAIL: "versions-deploy" },
    });
    assert.equal(canary.status, 1);
    assert.match(
      canary.stderr,
      /wrangler versions deploy failed .* should still serve all traffic/,
    );
    assert.ok(!canary.calls.some((c) => c.startsWith("rollback")));

    const promotion = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_FAIL: "versions-promote" },
    });
    assert.equal(promotion.status, 1);
    assert.match(promotion.stderr, /promotion to 100 % failed/);
    assert.match(changes(promotion.calls).at(-1), new RegExp(`^rollback ${SERVING} --yes `));
  });

  it("a failed rollback says how to roll back by hand", async () => {
    const dir = project({ edit: configured(NOT_ANSWERING) });
    const r = await deploy(dir, ["staging", "--yes"], { standIn: { STAND_IN_FAIL: "rollback" } });
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      new RegExp(`THE ROLLBACK FAILED.*\\n  npm run rollback -- staging --to ${SERVING}`),
    );
  });

  it("placeholder D1 ids and an empty or example.* PUBLIC_ORIGIN are refused before anything else", async () => {
    for (const target of ["staging", "production"]) {
      const placeholder = await deploy(project(), [target, "--yes"]);
      assert.equal(placeholder.status, 1);
      assert.match(placeholder.stderr, /placeholder database_id/);
      assert.match(placeholder.stderr, new RegExp(`d1 create animal-store-${target}`));
      assert.deepEqual(placeholder.calls, []);
    }
    const realIds = (t) =>
      t.replace(/database_id = "[^"]+"/g, () => `database_id = "${randomUUID()}"`);
    const empty = await deploy(project({ edit: realIds }), ["staging", "--yes"]);
    assert.equal(empty.status, 1);
    assert.match(empty.stderr, /PUBLIC_ORIGIN is empty/);
    const example = await deploy(
      project({
        edit: (t) =>
          realIds(t).replace(
            /PUBLIC_ORIGIN = "[^"]*"/g,
            'PUBLIC_ORIGIN = "https://api.example.com"',
          ),
      }),
      ["staging", "--yes"],
    );
    assert.equal(example.status, 1);
    assert.match(example.stderr, /PUBLIC_ORIGIN is the placeholder https:\/\/api\.example\.com/);
  });

  it("the first deploy of an environment is a plain wrangler deploy, then the smoke test", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes"], { standIn: { STAND_IN_SERVING: "none" } });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.deepEqual(
      changes(r.calls).map((c) => c.split(" --")[0]),
      ["deploy"],
    );
    assert.match(r.stdout, /first deploy of this environment/);
    assert.match(r.stdout, /✓ disable the smoke key/);
  });

  it("--all-at-once: wrangler deploy, the smoke test, and a rollback when it fails", async () => {
    const dir = project({ edit: configured() });
    const r = await deploy(dir, ["staging", "--yes", "--all-at-once"]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.deepEqual(
      changes(r.calls).map((c) => c.split(" --")[0]),
      ["deploy"],
    );
    assert.match(r.stdout, /✓ disable the smoke key/);

    const failing = project({ edit: configured(NOT_ANSWERING) });
    const back = await deploy(failing, ["staging", "--yes", "--all-at-once"]);
    assert.equal(back.status, 1);
    assert.deepEqual(
      changes(back.calls).map((c) => c.split(" --")[0]),
      ["deploy", `rollback ${SERVING}`],
    );
    const both = await deploy(dir, ["staging", "--all-at-once", "--percentage", "20"]);
    assert.equal(both.status, 2);
    assert.match(both.stderr, /exclude each other/);
  });

  it("a dirty working tree or failing tests stop it; --force goes on and says what it skipped", async () => {
    const dirty = project({ edit: configured() });
    writeFileSync(
      path.join(dirty, "wrangler.toml"),
      `${readFileSync(path.join(dirty, "wrangler.toml"), "utf8")}\n# edit\n`,
    );
    const refused = await deploy(dirty, ["staging", "--yes"]);
    assert.equal(refused.status, 1);
    assert.match(
      refused.stderr,
      /uncommitted changes:\n M wrangler\.toml\nCommit them, or pass --force/,
    );
    assert.deepEqual(refused.calls, []);

    const forced = await deploy(dirty, ["staging", "--yes", "--force"]);
    assert.equal(forced.status, 0, forced.stdout + forced.stderr);
    assert.match(
      forced.stdout,
      /! --force: deploying anyway; the working tree has uncommitted changes/,
    );
    assert.match(forced.stdout, /! --force: the tests were not run/);
    assert.ok(forced.calls.some((c) => /--message deploy \w+ \(forced\)/.test(c)));

    const red = project({ edit: configured(), testsExit: 1 });
    const failing = await deploy(red, ["staging", "--yes"]);
    assert.equal(failing.status, 1);
    assert.match(failing.stderr, /the tests fail \(npm test\)/);
    assert.deepEqual(failing.calls, []);
  });

  it("production: refused without a route or custom domain, or with read replication off", async () => {
    const origin = "https://api.animal-store.dev";
    const noRoute = project({
      edit: (t) =>
        configured()(t).replace(
          /(\[env\.production\.vars\][^[]*?)PUBLIC_ORIGIN = "[^"]*"/,
          `$1PUBLIC_ORIGIN = "${origin}"`,
        ),
    });
    const r = await deploy(noRoute, ["production", "--yes"]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /\[env\.production\] has no route or custom domain/);
    assert.match(
      r.stderr,
      /routes = \[\{ pattern = "api\.animal-store\.dev", custom_domain = true \}\]/,
    );
    assert.deepEqual(r.calls, []);

    const routed = project({
      edit: (t) =>
        configured()(t)
          .replace(
            /(\[env\.production\.vars\][^[]*?)PUBLIC_ORIGIN = "[^"]*"/,
            `$1PUBLIC_ORIGIN = "${origin}"`,
          )
          .replace(
            /# routes = \[\{ pattern = "api\.example\.com", custom_domain = true \}\]/,
            'routes = [{ pattern = "api.animal-store.dev", custom_domain = true }]',
          ),
    });
    const off = await deploy(routed, ["production", "--yes"], {
      standIn: { STAND_IN_REPLICATION: "disabled" },
    });
    assert.equal(off.status, 1, off.stdout + off.stderr);
    assert.match(off.stderr, /D1 read replication is off on animal-store-production/);
    assert.deepEqual(changes(off.calls), []);
  });

  it("a compatibility date newer than the pinned runtime is refused", async () => {
    const dir = project({
      edit: (t) =>
        configured()(t).replace(
          /compatibility_date = "[^"]+"/,
          'compatibility_date = "2099-01-01"',
        ),
    });
    const r = await deploy(dir, ["staging", "--yes"]);
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      /compatibility_date 2099-01-01 is newer than the pinned runtime supports/,
    );
    assert.deepEqual(r.calls, []);
  });

  it("npm run set-secrets: one new version with the secrets (versions secret bulk, tagged), deployed to 100 %", async () => {
    const dir = project({ edit: configured() });
    const SECRET_VERSION = "44444444-dddd-4ddd-8ddd-444444444444";
    const value = "a-new-cursor-secret-value-0123456789";
    const input = JSON.stringify({
      CURSOR_SECRET_PREVIOUS: "old-value",
      CURSOR_SECRET: value,
      GONE: null,
    });
    const setSecrets = (args, options) => run(dir, "set-secrets.mjs", args, { input, ...options });

    const r = await setSecrets(["production", "--yes"], {
      standIn: { STAND_IN_TAGS: `${SERVING}=abc1234` },
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.deepEqual(r.calls, [
      "whoami --json --env production",
      "deployments status --json --env production",
      "versions list --json --env production",
      "versions secret bulk --tag abc1234 --message secrets: set CURSOR_SECRET_PREVIOUS, set CURSOR_SECRET, delete GONE --env production",
      "stdin CURSOR_SECRET_PREVIOUS=set CURSOR_SECRET=set GONE=deleted",
      `versions deploy ${SECRET_VERSION}@100 --yes --message secrets: set CURSOR_SECRET_PREVIOUS, set CURSOR_SECRET, delete GONE --env production`,
    ]);
    assert.match(r.stdout, new RegExp(`✓ production: ${SECRET_VERSION} serves all traffic`));
    assert.ok(!`${r.stdout}${r.stderr}`.includes(value), "a secret value is never printed");
    assert.ok(!r.calls.some((c) => c.includes(value)), "nor on wrangler's command line");

    // Without --yes: what would change, and nothing changed.
    const unasked = await setSecrets(["production"]);
    assert.equal(unasked.status, 1);
    assert.match(unasked.stdout, /CURSOR_SECRET_PREVIOUS, CURSOR_SECRET set and GONE deleted/);
    assert.match(unasked.stderr, /pass --yes/);
    assert.ok(!unasked.calls.some((c) => c.startsWith("versions secret")));

    // Refused before any change: two versions serving, a newer version that does not serve, a
    // serving version without a tag.
    for (const [standIn, reason] of /** @type {Array<[Record<string, string>, RegExp]>} */ ([
      [{ STAND_IN_GRADUAL: `${NEW}@10` }, /2 versions serve .*Finish that deployment first/],
      [{ STAND_IN_NEWEST: NEW }, new RegExp(`the newest version ${NEW} is not the one serving`)],
      [{ STAND_IN_TAGS: `${SERVING}=-` }, /has no git revision tag/],
    ])) {
      const refused = await setSecrets(["staging", "--yes"], { standIn });
      assert.equal(refused.status, 1, JSON.stringify(standIn));
      assert.match(refused.stderr, reason);
      assert.ok(
        !refused.calls.some((c) => /^versions (secret|deploy)/.test(c)),
        refused.calls.join("\n"),
      );
    }

    // Input that is not an object of names to strings (or null): exit 2, no value echoed.
    for (const bad of ["not json", "[]", "{}", '{"lower": "x"}', '{"NAME": 5}', '{"NAME": ""}']) {
      const r2 = await run(dir, "set-secrets.mjs", ["staging", "--yes"], { input: bad });
      assert.equal(r2.status, 2, bad);
      assert.match(r2.stderr, /Usage: <JSON object> \| npm run set-secrets/);
      assert.deepEqual(r2.calls, []);
    }
  });

  it("npm run rollback: asks (or --yes), rolls back, shows what serves; refuses when logged out; reports a failure", async () => {
    const dir = project({ edit: configured() });
    const rollback = (args, options) => run(dir, "rollback.mjs", args, options);

    const unasked = await rollback(["staging"]);
    assert.equal(unasked.status, 1);
    assert.match(unasked.stderr, /not asked \(no terminal\): pass --yes/);
    assert.ok(!unasked.calls.some((c) => c.startsWith("rollback")));

    const back = await rollback(["staging", "--yes"]);
    assert.equal(back.status, 0, back.stdout + back.stderr);
    assert.deepEqual(back.calls, [
      "whoami --json --env staging",
      "deployments status --env staging",
      "deployments status --json --env staging",
      "deployments list --json --env staging",
      `versions view ${BEFORE} --json --env staging`,
      `versions view ${SERVING} --json --env staging`,
      `rollback ${BEFORE} --yes --message manual rollback to ${BEFORE}, the version deployed before the current one --env staging`,
      "deployments status --env staging",
    ]);
    assert.match(back.stdout, /✓ rolled back/);

    const to = await rollback(["production", "--yes", "--to", SERVING]);
    assert.equal(to.status, 0, to.stdout + to.stderr);
    assert.ok(
      to.calls.includes(
        `rollback ${SERVING} --yes --message manual rollback to ${SERVING} --env production`,
      ),
    );

    const loggedOut = await rollback(["staging", "--yes"], {
      standIn: { STAND_IN_FAIL: "whoami" },
    });
    assert.equal(loggedOut.status, 1);
    assert.match(loggedOut.stderr, /not logged in/);
    assert.deepEqual(loggedOut.calls, ["whoami --json --env staging"]);

    const failed = await rollback(["staging", "--yes"], { standIn: { STAND_IN_FAIL: "rollback" } });
    assert.equal(failed.status, 1);
    assert.match(failed.stderr, /wrangler rollback failed/);

    const bad = await rollback(["everywhere"]);
    assert.equal(bad.status, 2);
  });
  it("deploy: refused in the preflight when the version serving now cannot read what this release writes", async () => {
    const dir = project({ edit: configured() });
    const earlier = earlierRelease(dir, beforeRoutedKeys);
    const r = await deploy(dir, ["staging", "--yes"], {
      standIn: {
        STAND_IN_TAGS: `${SERVING}=${earlier.slice(0, 7)}`,
        STAND_IN_PENDING: "0006_more.sql",
      },
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /if this deploy failed, it could not roll back/);
    assert.match(r.stderr, /API keys in the format routed/);
    assert.match(
      r.stderr,
      /QuotaLimiter storage at schema version 10: the target opens versions up to 4/,
    );
    assert.match(r.stderr, /Deploy first a release that reads what this one writes/);
    assert.deepEqual(changes(r.calls), []);
  });

  it("deploy --force over such a version: a failed smoke test does not roll back; the new version keeps serving", async () => {
    const dir = project({ edit: configured(NOT_ANSWERING) });
    const earlier = earlierRelease(dir, beforeRoutedKeys);
    const r = await deploy(dir, ["staging", "--yes", "--force"], {
      standIn: { STAND_IN_TAGS: `${SERVING}=${earlier}` },
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      new RegExp(`! --force: a failed deploy will not roll back to ${SERVING}`),
    );
    assert.match(r.stderr, /smoke test of the new version failed/);
    assert.match(r.stderr, /NOT ROLLED BACK: .* cannot read what/);
    assert.match(r.stderr, /roll forward: fix the current release/);
    assert.ok(!r.calls.some((c) => c.startsWith("rollback")), r.calls.join("\n"));
  });

  it("deploy: a serving version with no git revision, or one this checkout lacks, cannot be checked: refused", async () => {
    const dir = project({ edit: configured() });
    const untagged = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_TAGS: `${SERVING}=-` },
    });
    assert.equal(untagged.status, 1);
    assert.match(untagged.stderr, new RegExp(`version ${SERVING} has no git revision tag`));
    const unknown = await deploy(dir, ["staging", "--yes"], {
      standIn: { STAND_IN_TAGS: `${SERVING}=0badc0de` },
    });
    assert.equal(unknown.status, 1);
    assert.match(
      unknown.stderr,
      /deployed from 0badc0de, which this checkout does not have \(git fetch/,
    );
    assert.deepEqual(changes([...untagged.calls, ...unknown.calls]), []);
  });

  it("npm run rollback: refuses a target that cannot read what serves now, naming what and what to do", async () => {
    const dir = project({ edit: configured() });
    const earlier = earlierRelease(dir, beforeRoutedKeys);
    const r = await run(dir, "rollback.mjs", ["production", "--yes"], {
      standIn: { STAND_IN_TAGS: `${BEFORE}=${earlier}` },
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `Not rolling back production: ${BEFORE} \\(${earlier.slice(0, 7)}\\) cannot read what`,
      ),
    );
    assert.match(
      r.stderr,
      /API keys in the format routed: issued by the current release, refused \(401\)/,
    );
    assert.match(r.stderr, /QuotaLimiter storage at schema version 10/);
    assert.match(r.stderr, /roll forward: fix the current release and deploy the fix/);
    assert.match(r.stderr, /restoring D1 does not take objects back/);
    assert.ok(!r.calls.some((c) => c.startsWith("rollback")), r.calls.join("\n"));

    // Keys alone: D1 Time Travel (losing the keys issued since) is the other way out.
    const keysOnly = earlierRelease(dir, (m) => ({
      ...m,
      keys: { reads: ["plain"], writes: ["plain"] },
    }));
    const k = await run(dir, "rollback.mjs", ["production", "--yes"], {
      standIn: { STAND_IN_TAGS: `${BEFORE}=${keysOnly}` },
    });
    assert.equal(k.status, 1);
    assert.match(k.stderr, /restore D1 with Time Travel .* then roll back/s);
    assert.ok(!k.calls.some((c) => c.startsWith("rollback")));
  });
});
