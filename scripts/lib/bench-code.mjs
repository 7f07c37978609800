// @ts-check
// What marks measurement code in a bundle: a source file under bench/, or one of the bench's own
// names (the simulated network's response header and settings), which survive minification as
// strings.

/** Strings only the bench's code contains. */
export const BENCH_MARKERS = ["X-Bench-Calls", "BENCH_LIMITER_RTT_MS", "BENCH_D1_RTT_MS"];

/**
 * What in a bundle is bench code: its esbuild metafile's inputs under bench/, and the markers in
 * its code. Empty when there is none.
 * @param {{ inputs?: Record<string, unknown> }} metafile
 * @param {string} code
 * @returns {string[]}
 */
export function benchCodeIn(metafile, code) {
  const inputs = Object.keys(metafile.inputs ?? {}).filter((input) => /(^|\/)bench\//.test(input));
  if (!Object.keys(metafile.inputs ?? {}).length) return ["the metafile lists no inputs"];
  const markers = BENCH_MARKERS.filter((marker) => code.includes(marker));
  return [...inputs.map((i) => `source ${i}`), ...markers.map((m) => `the string "${m}"`)];
}
