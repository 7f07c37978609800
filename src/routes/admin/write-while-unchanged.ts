import { unavailable } from "../../lib/errors";

// A write that lost a race to another admin write is decided again on the fresh record. An attempt
// loses only when another write to the record landed between its read and its write, and each
// write lands once, so a write that meets at most WRITE_ATTEMPTS − 1 others while it tries lands:
// WRITE_ATTEMPTS writes to one record at once all land, however slow D1 is (docs/operations.md
// promises the count). The full jitter between attempts (0 to 5 ms × 2^attempt, at most 160 ms)
// spreads the losers out, so most land within a few attempts rather than all racing each round.
export const WRITE_ATTEMPTS = 32;
const WRITE_BACKOFF_MS = { base: 5, max: 160 };

/**
 * Reads a record (`readOrThrow`: 404 for an unknown one) and lets `writeIfUnchanged` write it, on
 * condition that it is still the one read: a write that finds another admin write got there first
 * (null) waits a jittered moment, reads the record and decides again, up to WRITE_ATTEMPTS times,
 * so no write is lost and concurrent writers all land. Returns the record as written. Throws 503
 * with `keptChangingMessage` if the record changed under every attempt.
 */
export async function writeWhileUnchangedOrThrow<T>(
  readOrThrow: () => Promise<T>,
  writeIfUnchanged: (current: T, now: number) => Promise<T | null> | T | null,
  { now, keptChangingMessage }: { now: () => number; keptChangingMessage: string },
): Promise<T> {
  for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
    if (attempt > 0) {
      const cap = Math.min(WRITE_BACKOFF_MS.max, WRITE_BACKOFF_MS.base * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * cap));
    }
    const written = await writeIfUnchanged(await readOrThrow(), now());
    if (written) return written;
  }
  throw unavailable(keptChangingMessage);
}
