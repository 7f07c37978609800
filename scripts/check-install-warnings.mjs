#!/usr/bin/env node
// @ts-check
// `node scripts/check-install-warnings.mjs npm-ci.log` (CI, after `npm ci --loglevel=warn`): the
// project's .npmrc shows only errors at install, to spare Node 20 users the EBADENGINE warnings
// of packages that want Node >= 22 (which the `node` devDependency supplies to every script).
// This makes sure that is all it hides: it fails on an EBADENGINE warning that the Node running
// the scripts does not satisfy, and on any other warning about the project's packages
// (deprecations, peer dependency conflicts, …), which it prints. Warnings about the user's own
// npm configuration are printed, and do not fail.
import { readFileSync } from "node:fs";

/** "22.12" → [22, 12, 0]. */
const parts = (v) => {
  const [major = 0, minor = 0, patch = 0] = v.replace(/^v/, "").split(".").map(Number);
  return [major, minor, patch];
};
const compare = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/**
 * Whether `version` satisfies an engines range of the forms packages use here (`>=22`,
 * `^22.12.0 || >=24`, `<26`, an exact version). Anything else counts as not satisfied, so it is
 * reported rather than passed.
 */
function satisfies(version, range) {
  const v = parts(version);
  return range.split("||").some((alternative) =>
    alternative
      .trim()
      .split(/\s+/)
      .every((comparator) => {
        const m = comparator.match(/^(>=|<=|>|<|\^|~|=)?v?(\d+(?:\.\d+){0,2})$/);
        if (!m) return false;
        const w = parts(m[2]);
        const c = compare(v, w);
        switch (m[1]) {
          case ">=":
            return c >= 0;
          case ">":
            return c > 0;
          case "<=":
            return c <= 0;
          case "<":
            return c < 0;
          case "^":
            return c >= 0 && v[0] === w[0];
          case "~":
            return c >= 0 && v[0] === w[0] && v[1] === w[1];
          default:
            return c === 0;
        }
      }),
  );
}

const file = process.argv[2];
if (!file) {
  console.error("usage: check-install-warnings.mjs <npm ci log>");
  process.exit(2);
}
const lines = readFileSync(file, "utf8").split("\n");
const problems = [];
const notes = [];
let ebadengine = 0;
for (let i = 0; i < lines.length; i++) {
  const line = lines[i] ?? "";
  if (!/^npm warn /i.test(line)) continue;
  if (/^npm warn EBADENGINE Unsupported engine \{$/.test(line)) {
    // The block: package, required, current, then "}".
    const block = [];
    while (i + 1 < lines.length && /^npm warn EBADENGINE /.test(lines[i + 1] ?? "")) {
      const next = lines[++i] ?? "";
      if (/^npm warn EBADENGINE \}$/.test(next)) break;
      block.push(next.replace(/^npm warn EBADENGINE\s+/, ""));
    }
    const text = block.join(" ");
    const pkg = text.match(/package: '([^']+)'/)?.[1] ?? "?";
    const node = text.match(/node: '([^']+)'/)?.[1];
    ebadengine++;
    if (!node || !satisfies(process.version, node))
      problems.push(
        `${pkg} wants ${text.match(/required: (\{[^}]*\})/)?.[1] ?? text}, which ${process.version} does not satisfy`,
      );
    continue;
  }
  if (/^npm warn EBADENGINE /.test(line)) continue;
  if (/^npm warn (Unknown (user|global|env) config|config )/i.test(line)) notes.push(line);
  else problems.push(line);
}
for (const note of notes) console.log(`(not the project's) ${note}`);
if (problems.length) {
  console.error(problems.map((p) => `✗ ${p}`).join("\n"));
  console.error(
    `\n✗ npm ci warned about more than engines the scripts' Node (${process.version}) satisfies: see above`,
  );
  process.exit(1);
}
console.log(
  `✓ install: ${ebadengine} EBADENGINE warnings, each satisfied by the scripts' Node ${process.version}; no other warning about the project's packages`,
);
