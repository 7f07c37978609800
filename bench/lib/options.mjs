// @ts-check
// Command-line options of the bench tools, read with node:util's parseArgs (as scripts/keys.mjs
// reads its own): `--name value` or `--name=value`, each option with a default.
import { parseArgs } from "node:util";

/**
 * @typedef {{ default: number, min?: number, max?: number }} NumberOption
 *   A whole number from `min` (default 0) to `max` (default 65,535).
 * @typedef {{ default: string, choices?: string[], pattern?: RegExp }} StringOption
 * @typedef {Record<string, NumberOption | StringOption>} OptionSpec
 */

/** `limiter-rtt` → `limiterRtt`. */
const camel = (name) => name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());

/**
 * The options in `argv`, checked against `spec` and keyed in camelCase (`--limiter-rtt` is
 * `limiterRtt`); on an unknown option or a bad value, prints why and `usage` and exits 2.
 * `--help` prints `usage` and exits 0.
 * @param {string[]} argv
 * @param {OptionSpec} spec
 * @param {string} usage
 * @returns {Record<string, any>}
 */
export function optionsOrExit(argv, spec, usage) {
  const fail = (message) => {
    console.error(`${message}\n\n${usage}`);
    process.exit(2);
  };
  /** @type {import("node:util").ParseArgsConfig["options"]} */
  const options = { help: { type: "boolean", short: "h" } };
  for (const name of Object.keys(spec)) options[name] = { type: "string" };
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true }));
  } catch (err) {
    return fail(/** @type {Error} */ (err).message);
  }
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  /** @type {Record<string, any>} */
  const out = {};
  for (const [name, option] of Object.entries(spec)) {
    const raw = values[name];
    if (typeof option.default === "number") {
      const { min = 0, max = 65_535 } = /** @type {NumberOption} */ (option);
      const value = raw === undefined ? option.default : Number(raw);
      if (!Number.isInteger(value) || value < min || value > max)
        fail(`--${name} must be a whole number from ${min} to ${max}, not ${raw}`);
      out[camel(name)] = value;
    } else {
      const { choices, pattern } = /** @type {StringOption} */ (option);
      const value = typeof raw === "string" ? raw : option.default;
      if (choices && !choices.includes(value))
        fail(`--${name} must be one of ${choices.join(", ")}, not ${value}`);
      if (pattern && !pattern.test(value)) fail(`--${name} must match ${pattern}, not ${value}`);
      out[camel(name)] = value;
    }
  }
  return out;
}
