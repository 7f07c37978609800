// @ts-check
/** The gzipped size the deployed Worker's bundle should stay within, in KiB (reported, not enforced). */
export const BUDGET_KIB = 120;
