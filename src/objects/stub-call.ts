import type { Region } from "../schemas/region";

/**
 * How the Worker calls a Durable Object. Cloudflare marks its errors ("Error handling" in the
 * Durable Objects docs): `.retryable` (transient), `.overloaded` (retrying only adds load) and
 * `.remote` (thrown by the object's own code).
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

/**
 * Why a failed call will fail again however often it is repeated (an object that cannot open, or
 * its own code's exception), or null for the infrastructure's transient failure.
 */
export function persistentFailureOf(err: unknown): string | null {
  const message = err instanceof Error ? err.message : String(err);
  if (message.includes(CANNOT_OPEN)) return message;
  const { remote, retryable, overloaded } = marksOf(err);
  return remote === true && !retryable && !overloaded ? message : null;
}

/**
 * Runs `call` on a stub from `stubFor()`, once more on a fresh stub (a stub that has failed may
 * stay broken) after an error marked `.retryable` and not `.overloaded`.
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
