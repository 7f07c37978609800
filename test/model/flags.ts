// Invariants of the quota model held back until the fix of the finding they catch has landed.
// Each is true once its fix is on main: the commit of the fix flips it, and the model then holds
// the fix to it in every run. Never set one back to false to make a run pass.

/** Item 2: a served request is counted and billed once, however often its admission is retried. */
export const ADMISSIONS_COUNTED_ONCE = true;

/** Item 5: windows only move forward; a clock that steps back (or runs behind) reopens none. */
export const WINDOWS_ONLY_MOVE_FORWARD = true;

/** Item 6: X-RateLimit-Remaining is exact in one location, and within heldBound below across them. */
export const REMAINING_EXACT = true;
