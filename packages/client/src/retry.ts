/**
 * A `fetch` that gives each attempt a time limit and retries what is safe to retry:
 *
 * - network errors (the connection failed or was cut) and attempts that ran out of time;
 * - 429 (rate limit, daily quota, ban), waiting at least its `Retry-After`; a ban (`key_banned`)
 *   without a `Retry-After` is never retried;
 * - 503 with a `Retry-After` (the database or the rate limiter is unavailable for a moment);
 * - only requests that may be repeated: GET, HEAD, PUT, DELETE and OPTIONS, and any other method
 *   that carries an `Idempotency-Key`. A POST without one is never retried, whatever happened;
 * - only when the body can be sent again: none, a string, bytes, a Blob, form data or a
 *   `Request` (cloned before each attempt); a `ReadableStream` passed in `init.body` cannot.
 *
 * Each wait is max(Retry-After, full-jitter backoff): a random time between 0 and
 * min(maxBackoffMs, baseDelayMs × 2^retry). A `Retry-After` longer than `maxRetryAfterMs` (a ban,
 * a used-up daily quota) is never cut short: the response is returned to the caller at once.
 * Waits end early, with the signal's reason, when the caller's AbortSignal fires. When every
 * attempt failed without an answer it throws a `NetworkError` (a `TimeoutError` if the last one
 * ran out of time) with the last failure as its `cause`.
 */
import { NetworkError, TimeoutError } from "./errors.js";

export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  maxRetries?: number;
  /** First backoff step (default 500 ms); the step doubles with each retry. */
  baseDelayMs?: number;
  /** Longest backoff step (default 10 s); a Retry-After may ask for longer, up to maxRetryAfterMs. */
  maxBackoffMs?: number;
  /**
   * Longest `Retry-After` the client waits out (default 60 s). An answer asking for longer (a
   * temporary ban, a used-up daily quota) is returned to the caller at once, never retried early.
   */
  maxRetryAfterMs?: number;
  /** @deprecated The former name of `maxRetryAfterMs`. */
  maxDelayMs?: number;
  /**
   * How long one attempt may wait for the response's headers (default 30 s), and for the error
   * body of a 429 without Retry-After that the client reads to tell a ban; then it is abandoned
   * and retried like a network error. `Infinity` for no limit.
   */
  timeoutMs?: number;
  /** The fetch to wrap (default: the global fetch). */
  fetch?: typeof fetch;
  /** How to wait (default: a timer that an AbortSignal cancels); replaced in tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Random numbers in [0, 1) for the jitter (default Math.random). */
  random?: () => number;
  /** Called with every response, including the ones that are retried. */
  onResponse?: (response: Response) => void;
}

/** The retry options' defaults, in one place (the README quotes them: test/client.test.ts). */
export const RETRY_DEFAULTS = {
  maxRetries: 3,
  baseDelayMs: 500,
  maxBackoffMs: 10_000,
  maxRetryAfterMs: 60_000,
  timeoutMs: 30_000,
} as const;

const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

/** A timer that resolves after `ms`, or rejects with the signal's reason when it is aborted. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * `Retry-After` in milliseconds: delay-seconds or an HTTP date; undefined when absent or
 * unreadable. Never negative.
 */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const value = headers.get("Retry-After")?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Full jitter: a random wait in [0, min(cap, base × 2^retry)). */
export function fullJitterBackoffMs(
  retry: number,
  { baseDelayMs, maxBackoffMs }: { baseDelayMs: number; maxBackoffMs: number },
  random: () => number = Math.random,
): number {
  return random() * Math.min(maxBackoffMs, baseDelayMs * 2 ** retry);
}

/** Whether a body given in `init` can be sent a second time. */
function replayableBody(body: RequestInit["body"] | undefined): boolean {
  return body == null || !(typeof ReadableStream !== "undefined" && body instanceof ReadableStream);
}

/** The `code` of a JSON error body (either shape), read from a copy so the caller can still read it. */
async function errorCode(res: Response): Promise<unknown> {
  try {
    return ((await res.clone().json()) as { code?: unknown } | null)?.code;
  } catch {
    return undefined;
  }
}

/**
 * How long to wait before retrying `res`, or undefined when it must not be retried: a status
 * other than 429 and 503, a 503 without Retry-After, a ban without Retry-After, or a Retry-After
 * longer than `maxRetryAfterMs`.
 */
async function waitBeforeRetryMs(
  res: Response,
  backoffMs: number,
  maxRetryAfterMs: number,
): Promise<number | undefined> {
  if (res.status !== 429 && res.status !== 503) return undefined;
  const after = retryAfterMs(res.headers);
  if (after === undefined) {
    if (res.status === 503 || (await errorCode(res)) === "key_banned") return undefined;
    return backoffMs;
  }
  if (after > maxRetryAfterMs) return undefined;
  return Math.max(after, backoffMs);
}

/** The reason an attempt gives up when it runs out of time. */
class AttemptTimedOut extends Error {}

/**
 * Calls `inner` with a signal that fires when the caller's does or after `timeoutMs`, whichever
 * comes first. The timer runs on after the headers arrive while the retry loop decides whether
 * to retry (which may read an error body) and stops at `release()`, before the response goes to
 * the caller, so it never keeps a process alive; the caller's signal still reaches the response,
 * so aborting it also stops reading the body.
 */
async function attemptWithTimeout(
  inner: typeof fetch,
  input: RequestInfo | URL,
  init: RequestInit | undefined,
  caller: AbortSignal | undefined,
  timeoutMs: number,
): Promise<{ res: Response; release: () => void }> {
  if (!Number.isFinite(timeoutMs)) return { res: await inner(input, init), release: () => {} };
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new AttemptTimedOut(`no answer within ${timeoutMs} ms`)),
    timeoutMs,
  );
  const onAbort = () => controller.abort(caller?.reason);
  caller?.addEventListener("abort", onAbort, { once: true });
  try {
    const res = await inner(input, { ...init, signal: controller.signal });
    return { res, release: () => clearTimeout(timer) };
  } catch (error) {
    clearTimeout(timer);
    caller?.removeEventListener("abort", onAbort);
    // fetch rejects with the signal's reason; some fetches wrap it in an AbortError instead.
    if (controller.signal.reason instanceof AttemptTimedOut && !caller?.aborted)
      throw controller.signal.reason;
    throw error;
  }
}

export function retryingFetch(options: RetryOptions = {}): typeof fetch {
  const {
    maxRetries = RETRY_DEFAULTS.maxRetries,
    baseDelayMs = RETRY_DEFAULTS.baseDelayMs,
    maxBackoffMs = RETRY_DEFAULTS.maxBackoffMs,
    maxRetryAfterMs = options.maxDelayMs ?? RETRY_DEFAULTS.maxRetryAfterMs,
    timeoutMs = RETRY_DEFAULTS.timeoutMs,
    sleep = abortableSleep,
    random = Math.random,
    onResponse,
  } = options;
  const inner = options.fetch ?? ((input, init) => fetch(input, init));

  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : undefined;
    const method = (init?.method ?? request?.method ?? "GET").toUpperCase();
    const url = request?.url ?? String(input);
    const headers = new Headers(init?.headers ?? request?.headers);
    const signal = init?.signal ?? request?.signal ?? undefined;
    const repeatable = IDEMPOTENT_METHODS.has(method) || headers.has("Idempotency-Key");
    // A Request's body can be read once: send clones, keep the original for the next attempt.
    const replayable = init?.body !== undefined ? replayableBody(init.body) : true;
    const canRetry = repeatable && replayable;

    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted(); // whatever fetch is plugged in, an aborted request is not sent
      const last = !canRetry || attempt >= maxRetries;
      const backoff = fullJitterBackoffMs(attempt, { baseDelayMs, maxBackoffMs }, random);
      let res: Response;
      let release: () => void;
      try {
        const sent = request && canRetry ? request.clone() : input;
        ({ res, release } = await attemptWithTimeout(inner, sent, init, signal, timeoutMs));
      } catch (error) {
        if (signal?.aborted) throw signal.reason; // the caller gave up: their reason, unwrapped
        if (last) {
          const Failure = error instanceof AttemptTimedOut ? TimeoutError : NetworkError;
          throw new Failure(method, url, attempt + 1, error);
        }
        await sleep(backoff, signal);
        continue;
      }
      onResponse?.(res);
      // Deciding may read an error body (is it a ban?): still within the attempt's timeoutMs.
      const wait = last ? undefined : await waitBeforeRetryMs(res, backoff, maxRetryAfterMs);
      release();
      if (wait === undefined) return res;
      await res.body?.cancel().catch(() => undefined); // an attempt given up has an errored body
      await sleep(wait, signal);
    }
  };
}
