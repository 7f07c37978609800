/**
 * A `fetch` that retries what is safe to retry, honouring `Retry-After`:
 *
 * - 429 (rate limit, quota, ban) and 503 (database unavailable);
 * - only requests that may be repeated: GET, HEAD, PUT, DELETE and OPTIONS, and any other method
 *   that carries an `Idempotency-Key`. A POST without one is never retried, whatever the answer;
 * - only when the body can be sent again: none, a string, bytes, a Blob, form data or a
 *   `Request` (cloned before each attempt); a `ReadableStream` passed in `init.body` cannot, so
 *   its response is returned as it is.
 *
 * Each wait is max(Retry-After, exponential backoff with jitter) and at most `maxDelayMs`; a
 * Retry-After longer than that (a temporary ban, an exhausted daily quota) is returned to the
 * caller instead of being waited out. Waits end early, with the signal's reason, when the
 * request's AbortSignal fires.
 */

export interface RetryOptions {
  /** Retries after the first attempt (default 5). */
  maxRetries?: number;
  /** First backoff step (default 500 ms); doubles on each retry, with jitter in [½, 1]. */
  baseDelayMs?: number;
  /** Longest single wait (default 60 s). A longer Retry-After is returned, not waited out. */
  maxDelayMs?: number;
  /** The fetch to wrap (default: the global fetch). */
  fetch?: typeof fetch;
  /** How to wait (default: a timer that an AbortSignal cancels); replaced in tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Random numbers in [0, 1) for the jitter (default Math.random). */
  random?: () => number;
  /** Called with every response, including the ones that are retried. */
  onResponse?: (response: Response) => void;
}

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

/** Whether a body given in `init` can be sent a second time. */
function replayableBody(body: RequestInit["body"] | undefined): boolean {
  return body == null || !(typeof ReadableStream !== "undefined" && body instanceof ReadableStream);
}

export function retryingFetch(options: RetryOptions = {}): typeof fetch {
  const {
    maxRetries = 5,
    baseDelayMs = 500,
    maxDelayMs = 60_000,
    sleep = abortableSleep,
    random = Math.random,
    onResponse,
  } = options;
  const inner = options.fetch ?? ((input, init) => fetch(input, init));

  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : undefined;
    const method = (init?.method ?? request?.method ?? "GET").toUpperCase();
    const headers = new Headers(init?.headers ?? request?.headers);
    const signal = init?.signal ?? request?.signal ?? undefined;
    const repeatable = IDEMPOTENT_METHODS.has(method) || headers.has("Idempotency-Key");
    // A Request's body can be read once: send clones, keep the original for the next attempt.
    const replayable = init?.body !== undefined ? replayableBody(init.body) : true;
    const canRetry = repeatable && replayable;

    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted(); // whatever fetch is plugged in, an aborted request is not sent
      const res = await inner(request && canRetry ? request.clone() : input, init);
      onResponse?.(res);
      if (!canRetry || attempt >= maxRetries) return res;
      if (res.status !== 429 && res.status !== 503) return res;
      const after = retryAfterMs(res.headers);
      if (after !== undefined && after > maxDelayMs) return res;
      const backoff = baseDelayMs * 2 ** attempt * (0.5 + random() / 2);
      await res.body?.cancel();
      await sleep(Math.min(maxDelayMs, Math.max(after ?? 0, backoff)), signal);
    }
  };
}
