// Invariants of the quota model held back until the fix of the finding they catch has landed.
// Each is true once its fix is on main: the commit of the fix flips it, and the model then holds
// the fix to it in every run. Never set one back to false to make a run pass.

/** Item 2: a served request is counted and billed once, however often its admission is retried. */
export const ADMISSIONS_COUNTED_ONCE = true;

/** Item 5: windows only move forward; a clock that steps back (or runs behind) reopens none. */
export const WINDOWS_ONLY_MOVE_FORWARD = true;

/** Item 6: X-RateLimit-Remaining is exact in one location, and within heldBound below across them. */
export const REMAINING_EXACT = true;

/**
 * A rollback meets no standing permit: it first drains the release serving (its key objects grant
 * none) and waits until every standing permit granted has ended (DRAIN_WAIT_MS,
 * scripts/lib/standing-drain.mjs), and only then does the previous release decide. The previous
 * release does not count a minute's standing permits as it starts, so without the drain a minute
 * it decided in could admit up to heldBound past its limit (a rollback with --now still can).
 * While this was false, the model allowed a minute the previous release decided in that slack.
 */
export const ROLLBACK_COUNTS_STANDING = true;
