// @ts-check
// The operator CLI's usage mistakes (scripts/keys.mjs): each is refused with a one-line message
// and exit code 2 before any request is sent. No API is started: the CLI points at a listener of
// this file's own, which counts what reaches it (a usage mistake sends nothing).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { listenOnFreePort, ROOT } from "./helpers.mjs";

const run = promisify(execFile);

/** The requests that reached the listener, as "METHOD path". */
const received = [];
const listener = createServer((req, res) => {
  received.push(`${req.method} ${req.url}`);
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end("{}");
});
let url = "";

before(async () => {
  url = `http://127.0.0.1:${await listenOnFreePort(listener)}`;
});

after(() => new Promise((resolve) => listener.close(() => resolve(undefined))));

/** Runs scripts/keys.mjs with `args` (and a token); resolves with exit code, stdout and stderr. */
async function keys(...args) {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      [path.join(ROOT, "scripts/keys.mjs"), ...args, "--token", "t", "--json"],
      { cwd: ROOT },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const err = /** @type {{ code: number, stdout: string, stderr: string }} */ (error);
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

const A = "key_AAAAAAAAAAAAAAAAAAAA";
const B = "key_BBBBBBBBBBBBBBBBBBBB";

test("the listener counts what the CLI sends (a well-formed command reaches it)", async () => {
  received.length = 0;
  const got = await keys("get", A, "--url", url);
  assert.equal(got.code, 0, got.stderr);
  assert.deepEqual(received, [`GET /admin/v1/keys/${A}`]);
});

test("two ids, an id given both ways, or an extra argument: exit 2, one line, nothing sent", async () => {
  /** @type {[string[], RegExp][]} */
  const mistakes = [
    [["disable", A, B], /^Unexpected argument: key_B{20}\.$/],
    [["get", A, "extra-arg"], /^Unexpected argument: extra-arg\.$/],
    [["revoke", A, "--id", B], /^revoke: give the id once, as an argument or as --id, not both\.$/],
    [["webhook-get", "whe_x", "--id", "whe_y"], /^webhook-get: give the id once/],
    [
      [
        "webhook-create",
        "https://a.example",
        "--hook-url",
        "https://b.example",
        "--events",
        "key.banned",
        "--all-owners",
      ],
      /^webhook-create: give the HOOK_URL once, as an argument or as --hook-url, not both\.$/,
    ],
    [["list", A], /^Unexpected argument: key_A{20}\.$/],
    [["usage-day", "2030-01-01", "--day", "2030-01-01"], /^Unexpected argument: 2030-01-01\.$/],
    [["audit", A, B], /^Unexpected argument: key_B{20}\.$/],
    [["list", "--id", A], /^list takes no id: drop --id\.$/],
  ];
  for (const [args, message] of mistakes) {
    received.length = 0;
    const got = await keys(...args, "--url", url);
    assert.equal(got.code, 2, `${args.join(" ")}: ${got.stderr}`);
    assert.match(got.stderr.split("\n")[0], message, args.join(" "));
    assert.deepEqual(received, [], `${args.join(" ")} sent a request`);
  }
});

test("a URL that is not http(s)://host[:port] is a usage mistake (exit 2), not an unreachable server", async () => {
  for (const bad of ["localhost:8799", "", "not-a-url", "ftp://example.com", "http://"]) {
    const got = await keys("list", "--url", bad);
    assert.equal(got.code, 2, `--url ${JSON.stringify(bad)}: ${got.stderr}`);
    assert.equal(
      got.stderr.split("\n")[0],
      `--url must be http(s)://host[:port], e.g. http://localhost:8787 (got ${JSON.stringify(bad)}).`,
    );
  }
  const fromEnv = await run(
    process.execPath,
    [path.join(ROOT, "scripts/keys.mjs"), "list", "--token", "t"],
    { cwd: ROOT, env: { ...process.env, ANIMAL_STORE_URL: "localhost:8799" } },
  ).catch((error) => error);
  assert.equal(fromEnv.code, 2, fromEnv.stderr);
  assert.match(fromEnv.stderr, /^\$ANIMAL_STORE_URL must be http\(s\):\/\/host\[:port\]/);
});
