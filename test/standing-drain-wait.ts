/// <reference types="vite/client" />
// The rollback's drain wait (scripts/lib/standing-drain.mjs), read from the script's text: the
// scripts run on Node without the Worker's TypeScript, so they write STANDING_MINUTES out, and the
// tests take the wait from there (test/docs.promised-numbers ties it to src/quota/standing.ts).
import drainScript from "../scripts/lib/standing-drain.mjs?raw";

const minutes = /^export const STANDING_MINUTES = (\d+);$/m.exec(drainScript)?.[1];
const extra = /^export const DRAIN_WAIT_MS = \(STANDING_MINUTES \+ (\d+)\) \* 60_000;$/m.exec(
  drainScript,
)?.[1];
if (minutes === undefined || extra === undefined)
  throw new Error("scripts/lib/standing-drain.mjs: STANDING_MINUTES or DRAIN_WAIT_MS not found");

/** STANDING_MINUTES as the rollback's drain counts it. */
export const DRAIN_STANDING_MINUTES = Number(minutes);
/** How long the rollback waits after the drain (DRAIN_WAIT_MS). */
export const DRAIN_WAIT_MS = (Number(minutes) + Number(extra)) * 60_000;
