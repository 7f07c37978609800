import type { Context } from "hono";

/**
 * Lets `work` finish after the response (`waitUntil`), so the client does not wait for it.
 * Without an execution context (the app called directly, as some tests do, where hono's
 * `executionCtx` throws) it simply runs unawaited. `work` must handle its own errors: nothing
 * here reports them.
 */
export function runAfterResponse(c: Context, work: Promise<unknown>): void {
  try {
    c.executionCtx.waitUntil(work);
  } catch {
    void work;
  }
}
