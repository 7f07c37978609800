import type { Region } from "../schemas/region";

/**
 * Cloudflare's marks on a Durable Object call's error ("Error handling" in its docs): `.retryable`
 * (transient), `.overloaded` (retrying only adds load), `.remote` (thrown by the object's code).
 */
type ObjectErrorMarks = { retryable?: boolean; overloaded?: boolean; remote?: boolean };

const marksOf = (err: unknown): ObjectErrorMarks =>
  typeof err === "object" && err !== null ? (err as ObjectErrorMarks) : {};

export const isOverloaded = (err: unknown): boolean => marksOf(err).overloaded === true;

/**
 * How the message of an object's error that it cannot open starts: the runtime carries the error
 * to the caller by its message only, without its class or `.remote` mark.
 */
export const CANNOT_OPEN = "object cannot open:";

/** Every call fails the same way until code or storage changes: not an outage. */
export class ObjectCannotOpenError extends Error {
  constructor(why: string, options?: ErrorOptions) {
    super(`${CANNOT_OPEN} ${why}`, options);
    this.name = "ObjectCannotOpenError";
  }
}

/** Runs an object's opening steps, throwing whatever fails as an ObjectCannotOpenError. */
export async function openOrThrow(open: () => void | Promise<void>): Promise<void> {
  try {
    await open();
  } catch (err) {
    throw err instanceof ObjectCannotOpenError ? err : new ObjectCannotOpenError(String(err));
  }
}

/** Why a failed call will fail again however often repeated, or null for a transient failure. */
export function persistentFailureOf(err: unknown): string | null {
  const message = err instanceof Error ? err.message : String(err);
  if (message.includes(CANNOT_OPEN)) return message;
  const { remote, retryable, overloaded } = marksOf(err);
  return remote === true && !retryable && !overloaded ? message : null;
}

/**
 * Runs `call` on a stub from `stubFor()`, again on a fresh one (a failed stub may stay broken)
 * after an error marked `.retryable`, not `.overloaded`.
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

/** A key's location hint, if it has a region (it places only an object not yet made). */
export function placedIn(region: Region | null): DurableObjectNamespaceGetDurableObjectOptions {
  return region ? { locationHint: region } : {};
}
