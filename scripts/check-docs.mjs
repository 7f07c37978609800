#!/usr/bin/env node
// @ts-check
// `npm run check:docs` (CI): the docs and the code's comments describe the product as it is.
//  1. No issue numbers, commit hashes, "this round" or first-person notes in the README, docs/,
//     bench/README.md and the source (src/, scripts/, bench/, e2e/, test/, packages/client/src).
//     History belongs in commit messages and CHANGELOG.md; the bench's generated result files
//     (bench/results/) name the commit they measured, and are not checked.
//  2. Every relative link in the Markdown resolves: the file exists, and a #fragment names a
//     heading of that file.
//  3. Every source file a comment in src/ names (`db/keys.ts`, `src/lib/config.ts`, …) exists.
//  4. bench/README.md states the bundle budget of scripts/lib/bundle-budget.mjs.
// Exits non-zero with one line per problem.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BUDGET_KIB } from "./lib/bundle-budget.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const rel = (file) => path.relative(ROOT, file);

/** Files under `dir` (relative to the root) whose names match `pattern`, skipping build output. */
function filesUnder(dir, pattern) {
  const out = [];
  const walk = (d) => {
    if (!existsSync(d)) return;
    for (const entry of readdirSync(d)) {
      if (["node_modules", "dist", ".wrangler", "results"].includes(entry)) continue;
      const full = path.join(d, entry);
      if (statSync(full).isDirectory()) walk(full);
      else if (pattern.test(entry)) out.push(full);
    }
  };
  walk(path.join(ROOT, dir));
  return out;
}

const CODE = /\.(ts|tsx|mjs|js)$/;
const markdown = [
  path.join(ROOT, "README.md"),
  path.join(ROOT, "CHANGELOG.md"),
  ...filesUnder("docs", /\.md$/),
  ...filesUnder("bench", /\.md$/),
  ...filesUnder("packages/client", /\.md$/),
].filter((f) => existsSync(f));
const code = ["src", "scripts", "bench", "e2e", "test", "packages/client/src"]
  .flatMap((d) => filesUnder(d, CODE))
  // This file spells the patterns it looks for.
  .filter((f) => f !== fileURLToPath(import.meta.url));

/** What product text must not contain, and why. */
const HISTORY = [
  { pattern: /\bissues? #?\d+\b/i, why: "an issue number" },
  { pattern: /(^|[\s(])#\d{1,5}\b(?![0-9a-f])/, why: "an issue number" },
  { pattern: /\bcommits? `?[0-9a-f]{7,40}\b/i, why: "a commit hash" },
  { pattern: /`(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}`/, why: "a commit hash" },
  { pattern: /\b(this|last|previous|next) round\b/i, why: '"this round" (history)' },
  {
    pattern: /(^|[^\w'/`-])(I|I'm|I've|I'd|I'll)(?=[\s,.;:!?)])(?!\/O)/,
    why: "a first-person note",
  },
  {
    pattern: /\b(we|We) (did|tried|measured|found|decided|changed|think)\b/,
    why: "a first-person note",
  },
];

const problems = [];

// CHANGELOG.md is history by design: it may name versions and dates, but not issues or commits.
for (const file of [...markdown, ...code]) {
  const isChangelog = rel(file) === "CHANGELOG.md";
  const lines = readFileSync(file, "utf8").split("\n");
  lines.forEach((line, i) => {
    for (const { pattern, why } of HISTORY) {
      if (isChangelog && why.startsWith('"this round"')) continue;
      if (pattern.test(line)) problems.push(`${rel(file)}:${i + 1}: ${why}: ${line.trim()}`);
    }
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

const anchorsByFile = new Map();
function anchorsOf(file) {
  let anchors = anchorsByFile.get(file);
  if (!anchors) {
    anchors = new Set();
    const counts = new Map();
    let fenced = false;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (/^\s*```/.test(line)) fenced = !fenced;
      const m = !fenced && line.match(/^#{1,6}\s+(.*?)\s*#*\s*$/);
      if (!m) continue;
      const base = slug(m[1]);
      const n = counts.get(base) ?? 0;
      counts.set(base, n + 1);
      anchors.add(n ? `${base}-${n}` : base);
    }
    anchorsByFile.set(file, anchors);
  }
  return anchors;
}

for (const file of markdown) {
  let fenced = false;
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, i) => {
      if (/^\s*```/.test(line)) fenced = !fenced;
      if (fenced) return;
      const text = line.replace(/`[^`]*`/g, "");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
        const [pathPart, fragment] = target.split("#");
        const resolved = pathPart ? path.resolve(path.dirname(file), pathPart) : file;
        const where = `${rel(file)}:${i + 1}`;
        if (!existsSync(resolved)) {
          problems.push(`${where}: broken link ${target} (no ${rel(resolved)})`);
          continue;
        }
        if (fragment && resolved.endsWith(".md") && !anchorsOf(resolved).has(fragment))
          problems.push(
            `${where}: broken link ${target} (no heading #${fragment} in ${rel(resolved)})`,
          );
      }
    });
}

// Source files named in src/'s comments: `lib/config.ts`, `src/db/keys.ts`, `./stub-call.ts`.
for (const file of filesUnder("src", CODE)) {
  const lines = readFileSync(file, "utf8").split("\n");
  lines.forEach((line, i) => {
    const comment = line.match(/(\/\/|\/\*|^\s*\*)(.*)$/)?.[2];
    if (!comment) return;
    for (const [name] of comment.matchAll(
      /(?<![\w@.-])[\w.-]+(\/[\w.-]+)*\.(ts|tsx|mjs|sql|md|toml|txt)\b/g,
    )) {
      if (!name.includes("/") && !/\.(md|toml)$/.test(name)) continue; // a bare name: too vague
      const candidates = [
        path.resolve(path.dirname(file), name),
        path.join(ROOT, "src", name),
        path.join(ROOT, name),
      ];
      if (!candidates.some((c) => existsSync(c)))
        problems.push(`${rel(file)}:${i + 1}: the comment names ${name}, which does not exist`);
    }
  });
}

const budgetPromise = `at most ${BUDGET_KIB} KiB gzipped`;
if (
  !readFileSync(path.join(ROOT, "bench/README.md"), "utf8")
    .replaceAll("**", "")
    .replace(/\s+/g, " ")
    .includes(budgetPromise)
) {
  problems.push(
    `bench/README.md: does not say "${budgetPromise}" (BUDGET_KIB in scripts/lib/bundle-budget.mjs)`,
  );
}

if (problems.length) {
  console.error(problems.join("\n"));
  console.error(`\n✗ ${problems.length} problem(s) in the docs and comments`);
  process.exit(1);
}
console.log(
  `✓ docs and comments: ${markdown.length} Markdown files and ${code.length} source files, no history notes, every relative link resolves`,
);
