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
 * A rollback counts, in the minute the previous release decides in, the standing permits already
 * used in that minute before it opened the key's object. The previous release rolls its window
 * into a new minute from 0: it does not count that minute's standing permits as it starts, so a
 * request a holder admitted from one (with no call to the key's object in that minute yet) is
 * not in its count, and the minute may admit up to heldBound past its limit. A rollback by
 * `npm run rollback` or the deploy drains first (scripts/lib/standing-drain.mjs: no standing
 * permit is left when the previous release decides), and the model's DrainedRollback holds it to
 * that with no slack. Rollback and RollbackWhileStanding are a rollback with `--now` (no drain),
 * which still allows it: the model allows a minute they decided in that slack (and no more).
 */
export const ROLLBACK_COUNTS_STANDING = false;
