#!/usr/bin/env node
// @ts-check
// `npm run seed`: applies the local D1 migrations and adds sample pets to the local store (the one
// `npm run dev` serves, under .wrangler/), so a newcomer's first `GET /v1/pets` lists animals.
// Adds nothing when the store already holds pets. `--persist-to DIR` seeds another local store.
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";

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

const USAGE = `Usage: npm run seed [-- --persist-to DIR]
Applies the local D1 migrations and adds ${SAMPLE_PETS.length} sample pets to the local store that \`npm run dev\`
serves, unless it already holds pets.
  --persist-to DIR  seed the local store under DIR instead (wrangler's --persist-to)
  --help, -h        this text
Exit codes: 0 seeded (or nothing to add), 1 wrangler failed, 2 bad arguments.`;

/** @returns {{ "persist-to"?: string, help?: boolean }} */
function optionsOrExit() {
  try {
    return parseArgs({
      options: { "persist-to": { type: "string" }, help: { type: "boolean", short: "h" } },
    }).values;
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    process.exit(2);
  }
}
const options = optionsOrExit();
if (options.help) {
  console.log(USAGE);
  process.exit(0);
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
