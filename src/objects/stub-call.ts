import type { Region } from "../schemas/region";

/**
 * How the Worker calls a Durable Object, written once. Cloudflare marks the errors it throws
 * (see "Error handling" in the Durable Objects docs): `.retryable` for a transient failure
 * (a disconnect, a reset object) that a fresh stub may not meet again, `.overloaded` for an
 * object that is past its throughput, where retrying only adds load, and `.remote` for an
 * exception thrown by the object's own code.
 */
interface ObjectErrorMarks {
  retryable?: boolean;
  overloaded?: boolean;
  remote?: boolean;
}

const marksOf = (err: unknown): ObjectErrorMarks =>
  typeof err === "object" && err !== null ? (err as ObjectErrorMarks) : {};

/** Whether `err` says the object is overloaded. */
export const isOverloaded = (err: unknown): boolean => marksOf(err).overloaded === true;

/**
 * Runs `call` on a stub from `stubFor()`; if it fails with an error marked `.retryable` and not
 * `.overloaded`, runs it once more on a fresh stub (a stub that has failed may stay broken).
 * Anything else, or a second failure, is thrown for the call site's own policy to handle.
 */
export async function callWithOneRetry<S, T>(
  stubFor: () => S,
  call: (stub: S) => Promise<T>,
): Promise<T> {
  try {
    return await call(stubFor());
  } catch (err) {
    const { retryable, overloaded } = marksOf(err);
    if (!retryable || overloaded) throw err;
    return await call(stubFor());
  }
}

/**
 * The options to get a key's quota object with: its location hint, if the key has a region. A
 * hint only places an object that does not exist yet; an existing one is reached wherever it is.
 */
export function placedIn(region: Region | null): DurableObjectNamespaceGetDurableObjectOptions {
  return region ? { locationHint: region } : {};
}
