import { tryGetContext } from "hono/context-storage";

export type LogLevel = "debug" | "info" | "warn" | "error";

type Fields = Record<string, unknown>;

const WRITERS: Record<LogLevel, (line: string) => void> = {
  debug: (line) => console.debug(line),
  info: (line) => console.log(line),
  warn: (line) => console.warn(line),
  error: (line) => console.error(line),
};

/** An error as one log field: name, message and stack, never a circular structure. */
export function describeError(err: unknown): string {
  return err instanceof Error
    ? `${err.name}: ${err.message}${err.stack ? `\n${err.stack}` : ""}`
    : String(err);
}

/** Logs a failure that is handled where it is caught: `err` goes in the field `error`. */
export function logFailure(level: LogLevel, msg: string, err: unknown, fields: Fields = {}): void {
  log(level, msg, { ...fields, error: String(err) });
}

/**
 * Writes one JSON line (Workers Logs indexes its fields). Inside a request it carries that
 * request's id (and the client's X-Request-Id beside it), found through Hono's context storage,
 * so no call site has to pass it along.
 * Durable Objects run outside the Worker's request context and log without one.
 */
export function log(level: LogLevel, msg: string, fields: Fields = {}): void {
  const ids = tryGetContext<{ Variables: { requestId?: string; clientRequestId?: string } }>()?.var;
  const { requestId, clientRequestId } = ids ?? {};
  WRITERS[level](JSON.stringify({ level, msg, requestId, clientRequestId, ...fields }));
}
