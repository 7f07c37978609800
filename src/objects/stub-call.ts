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
 * The start of the message of every error an object throws when it cannot open (its stored
 * schema is newer than its code reads, its constructor failed): the runtime carries an object's
 * error to the caller by its message, without its class or `.remote` mark.
 */
export const CANNOT_OPEN = "object cannot open:";

/**
 * An object that cannot open: every call to it fails the same way until its code or its storage
 * changes, so a caller must not read it as an outage (see `persistentFailureOf`).
 */
export class ObjectCannotOpenError extends Error {
  constructor(why: string, options?: ErrorOptions) {
    super(`${CANNOT_OPEN} ${why}`, options);
    this.name = "ObjectCannotOpenError";
  }
}

/**
 * Runs an object's opening steps (its constructor's work), throwing whatever fails as an
 * ObjectCannotOpenError, so that callers recognise it.
 */
export async function openOrThrow(open: () => void | Promise<void>): Promise<void> {
  try {
    await open();
  } catch (err) {
    throw err instanceof ObjectCannotOpenError ? err : new ObjectCannotOpenError(String(err));
  }
}

/**
 * Why a failed call will fail again however often it is repeated, or null for a transient
 * failure: an object that cannot open (its message starts with CANNOT_OPEN), or an exception
 * from the object's own code (`.remote`, not `.retryable` nor `.overloaded`). A transient one is
 * the infrastructure's: a dropped connection, a reset object, an overload, a network error.
 */
export function persistentFailureOf(err: unknown): string | null {
  const message = err instanceof Error ? err.message : String(err);
  if (message.includes(CANNOT_OPEN)) return message;
  const { remote, retryable, overloaded } = marksOf(err);
  return remote === true && !retryable && !overloaded ? message : null;
}

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
