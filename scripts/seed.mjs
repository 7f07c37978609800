#!/usr/bin/env node
// @ts-check
// `npm run seed`: applies the local D1 migrations and adds sample pets to the local store (the one
// `npm run dev` serves, under .wrangler/), so a newcomer's first `GET /v1/pets` lists animals.
// Adds nothing when the store already holds pets. `--persist-to DIR` seeds another local store;
// `--url URL` seeds a running server through its API instead (scripts/lib/service-key.mjs: the
// admin token issues the "seed" key, which creates the pets and is disabled afterwards).
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";
import { isLocalUrl, localAdminToken } from "./lib/dev-vars.mjs";
import { disableServiceKeyOrThrow, serviceKeyOrThrow } from "./lib/service-key.mjs";

/** [name, category id, status]: categories 1 dogs, 2 cats, 3 birds, 4 fish, 5 small mammals. */
const SAMPLE_PETS = [
  ["Rex", 1, "available"],
  ["Bella", 1, "available"],
  ["Max", 1, "pending"],
  ["Luna", 2, "available"],
  ["Milo", 2, "sold"],
  ["Nala", 2, "available"],
  ["Kiwi", 3, "available"],
  ["Rio", 3, "pending"],
  ["Bubbles", 4, "available"],
  ["Nemo", 4, "sold"],
  ["Hazel", 5, "available"],
  ["Pip", 5, "available"],
];

const SEED_KEY_NAME = "seed";

const USAGE = `Usage: npm run seed [-- --persist-to DIR | --url URL [--token ADMIN_TOKEN]]
Adds ${SAMPLE_PETS.length} sample pets, unless the store already holds pets. By default to the local store
that \`npm run dev\` serves, applying its D1 migrations first.
  --persist-to DIR  seed the local store under DIR instead (wrangler's --persist-to)
  --url URL         seed a running server through its API (POST /v1/pets) instead, with a key
                    named "${SEED_KEY_NAME}" that the admin token issues, reuses and disables afterwards
  --token TOKEN     the admin token for --url, with full access (default $ADMIN_TOKEN; for a URL
                    on this machine, ADMIN_TOKEN from .dev.vars)
  --help, -h        this text
Exit codes: 0 seeded (or nothing to add), 1 it failed (saying why), 2 bad arguments.`;

/** @param {string} message @returns {never} */
function exitWithUsage(message) {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
}

/** @returns {{ "persist-to"?: string, url?: string, token?: string, help?: boolean }} */
function optionsOrExit() {
  try {
    return parseArgs({
      options: {
        "persist-to": { type: "string" },
        url: { type: "string" },
        token: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (err) {
    return exitWithUsage(err instanceof Error ? err.message : String(err));
  }
}
const options = optionsOrExit();
if (options.help) {
  console.log(USAGE);
  process.exit(0);
}
if (options.url !== undefined) {
  if (options["persist-to"] !== undefined)
    exitWithUsage("--url and --persist-to exclude each other: --url seeds through the API.");
  await seedThroughApi(options.url, options.token);
  process.exit(0);
}
if (options.token !== undefined) exitWithUsage("--token goes with --url.");

/**
 * Seeds the server at `url` through its API; exits 1 saying why when it cannot.
 * @param {string} url @param {string | undefined} token
 */
async function seedThroughApi(url, token) {
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
    exitWithUsage(`--url ${url} is not an http(s) URL.`);
  const base = url.replace(/\/+$/, "");
  const adminToken =
    token ||
    process.env.ADMIN_TOKEN ||
    (isLocalUrl(url) ? localAdminToken() : "") ||
    exitWithUsage(
      `No admin token for ${base}: pass --token or set ADMIN_TOKEN${isLocalUrl(url) ? " (or run from a checkout with .dev.vars)" : ""}.`,
    );
  /** @param {string} check @param {string} path @param {{ method?: string, body?: string, headers?: Record<string, string> }} init */
  async function request(check, path, init = {}) {
    try {
      return await fetch(`${base}${path}`, {
        ...init,
        headers: { "Content-Type": "application/json", ...init.headers },
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      const cause = /** @type {{ cause?: { code?: string } }} */ (err).cause?.code ?? String(err);
      throw new Error(`${check}: ${base}${path} did not answer (${cause})`);
    }
  }
  /** @type {import("./lib/service-key.mjs").AdminRequest} */
  const admin = (path, init = {}) =>
    request(path, path, { ...init, headers: { Authorization: `Bearer ${adminToken}` } });
  /** @type {{ id: string, key: string }} */
  let seedKey;
  try {
    seedKey = await serviceKeyOrThrow(admin, SEED_KEY_NAME);
  } catch (err) {
    console.error(`✗ Not seeded: could not issue the ${SEED_KEY_NAME} key with the admin token.`);
    console.error(`  ${err instanceof Error ? err.message : String(err)}`);
    console.error("  It takes an admin token with full access (a read-only one is refused: 403).");
    process.exit(1);
  }
  const withKey = { Authorization: `Bearer ${seedKey.key}` };
  /** @type {string | null} */
  let outcome = null;
  try {
    const listed = await request("GET /v1/pets", "/v1/pets?limit=1", { headers: withKey });
    if (listed.status !== 200)
      throw new Error(`GET /v1/pets: expected 200, got ${listed.status}: ${await listed.text()}`);
    const firstPage = /** @type {unknown[]} */ (await listed.json());
    if (firstPage.length > 0) outcome = `${base} already holds pets; nothing added.`;
    else {
      for (const [name, categoryId, status] of SAMPLE_PETS) {
        const created = await request("POST /v1/pets", "/v1/pets", {
          method: "POST",
          // A retried run within a day does not add the same pet twice.
          headers: { ...withKey, "Idempotency-Key": `seed-${name}` },
          body: JSON.stringify({ name, categoryId, status }),
        });
        if (created.status !== 201)
          throw new Error(
            `POST /v1/pets (${name}): expected 201, got ${created.status}: ${(await created.text()).slice(0, 300)}`,
          );
      }
      outcome = `Added ${SAMPLE_PETS.length} sample pets to ${base}.`;
    }
  } catch (err) {
    console.error(`✗ Not seeded: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  } finally {
    await disableServiceKeyOrThrow(admin, seedKey.id).catch((err) =>
      console.error(`! could not disable the ${SEED_KEY_NAME} key: ${err.message}`),
    );
  }
  if (outcome === null) process.exit(1);
  console.log(outcome);
}
const extra = options["persist-to"] ? ["--persist-to", options["persist-to"]] : [];

/** Runs wrangler with `args`; exits with its status when it fails. Returns its standard output. */
function wrangler(args) {
  const run = spawnSync("wrangler", [...args, ...extra], {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
  });
  if (run.status !== 0) {
    process.stderr.write(run.stderr || run.stdout || "");
    console.error(`✗ wrangler ${args.slice(0, 3).join(" ")} failed`);
    process.exit(run.status ?? 1);
  }
  return run.stdout;
}

wrangler(["d1", "migrations", "apply", "DB", "--local"]);
const counted = JSON.parse(
  wrangler([
    "d1",
    "execute",
    "DB",
    "--local",
    "--json",
    "--command",
    "SELECT COUNT(*) AS n FROM pets",
  ]),
);
const existing = Number(counted[0]?.results?.[0]?.n ?? 0);
if (existing > 0) {
  console.log(
    `The local store already holds ${existing} ${existing === 1 ? "pet" : "pets"}; nothing added.`,
  );
  process.exit(0);
}
// Names and statuses are fixed strings above, with no quote in them: safe to inline in SQL.
const values = SAMPLE_PETS.map(
  ([name, category, status]) => `('${name}', ${category}, '${status}')`,
);
wrangler([
  "d1",
  "execute",
  "DB",
  "--local",
  "--command",
  `INSERT INTO pets (name, category_id, status) VALUES ${values.join(", ")}`,
]);
console.log(
  `Added ${SAMPLE_PETS.length} sample pets to the local store. With \`npm run dev\` running (on port 8787 unless you gave it --port) and a key:\n` +
    `  curl -s http://localhost:8787/v1/pets -H "Authorization: Bearer <key>"`,
);
