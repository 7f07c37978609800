// @ts-check
// The arguments of the scripts that act on one deployed environment (deploy, rollback,
// set-secrets): one environment named first, their own options, and --help.
import { parseArgs } from "node:util";

/**
 * Parses the command line as `options`, --help/-h and one environment. --help prints `usage` and
 * exits 0; anything else wrong throws, for the caller to print with its usage (exit code 2).
 * @template {import("node:util").ParseArgsOptionsConfig} T
 * @param {string} usage
 * @param {T} options
 */
export function environmentArgsOrThrow(usage, options) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { ...options, help: { type: "boolean", short: "h" } },
  });
  if (/** @type {{ help?: boolean }} */ (values).help) {
    console.log(usage);
    process.exit(0);
  }
  const [env, ...rest] = positionals;
  if ((env !== "staging" && env !== "production") || rest.length)
    throw new Error("name one environment: staging or production");
  return { env: /** @type {"staging" | "production"} */ (env), values };
}
