/**
 * A typed client for consumers: Hono RPC (`hc`) over the API's own route types, with the
 * retry behaviour the spec asks of clients (wait for Retry-After on 429/503, back off
 * exponentially). Not part of the Worker bundle.
 *
 *   const store = createAnimalStoreClient({ baseUrl: "https://api.example.com", apiKey });
 *   const res = await store.pets.$get({ query: { limit: "50", status: "available" } });
 */
import { hc } from "hono/client";
import type { petsApi } from "./routes/pets/routes";
import type { Pet } from "./schemas/pets";

export type { NewPet, Pet, PetStatus } from "./schemas/pets";

export interface RetryOptions {
  /** Retries after the first attempt (default 5). */
  maxRetries?: number;
  /** First backoff step (default 500 ms); doubles each retry, with jitter. */
  baseDelayMs?: number;
  /** Longest wait for one retry (default 60 s); a longer Retry-After (a ban) is returned to the caller. */
  maxDelayMs?: number;
  /** Injected in tests; defaults to setTimeout. */
  sleep?: (ms: number) => Promise<void>;
  fetch?: typeof fetch;
}

export interface ClientOptions extends RetryOptions {
  baseUrl: string;
  apiKey: string;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A 429 was not processed, so it is always safe to retry. A 503 may come after a write took
 * effect, so it is retried only where repeating is harmless: reads, and creates that carry an
 * Idempotency-Key.
 */
function retryable(
  res: Response,
  input: RequestInfo | URL,
  init: RequestInit | undefined,
): boolean {
  if (res.status === 429) return true;
  if (res.status !== 503) return false;
  const request = input instanceof Request ? input : undefined;
  if (request?.body) return false; // a Request's body can be sent only once
  const method = (init?.method ?? request?.method ?? "GET").toUpperCase();
  const idempotencyKey =
    new Headers(init?.headers).has("Idempotency-Key") || !!request?.headers.has("Idempotency-Key");
  return method === "GET" || method === "HEAD" || idempotencyKey;
}

/** fetch that retries 429 (and safe 503) answers: waits max(Retry-After, exponential backoff). */
export function retryingFetch({
  maxRetries = 5,
  baseDelayMs = 500,
  maxDelayMs = 60_000,
  sleep = defaultSleep,
  fetch: inner = fetch,
}: RetryOptions = {}): typeof fetch {
  return async (input, init) => {
    for (let attempt = 0; ; attempt++) {
      const res = await inner(input, init);
      if (!retryable(res, input, init) || attempt >= maxRetries) return res;
      const retryAfterMs = (Number(res.headers.get("Retry-After")) || 0) * 1000;
      if (retryAfterMs > maxDelayMs) return res;
      const backoffMs = baseDelayMs * 2 ** attempt * (0.5 + Math.random() / 2);
      await res.body?.cancel();
      await sleep(Math.min(maxDelayMs, Math.max(retryAfterMs, backoffMs)));
    }
  };
}

export function createAnimalStoreClient({ baseUrl, apiKey, ...retry }: ClientOptions) {
  return hc<typeof petsApi>(`${baseUrl.replace(/\/$/, "")}/v1`, {
    fetch: retryingFetch(retry),
    headers: { Authorization: `Bearer ${apiKey}` },
  });
}

export type AnimalStoreClient = ReturnType<typeof createAnimalStoreClient>;

/** The `cursor` of the `Link: <…>; rel="next"` header, or null on the last page. */
export function nextCursor(res: { headers: Headers }): string | null {
  const next = res.headers.get("Link")?.match(/<([^>]+)>;\s*rel="next"/)?.[1];
  return next ? new URL(next).searchParams.get("cursor") : null;
}

/** Every pet matching `status`, page by page. Throws the Error body of a failed page. */
export async function* allPets(
  client: AnimalStoreClient,
  query: { status?: Pet["status"]; limit?: string } = {},
): AsyncGenerator<Pet> {
  let cursor: string | undefined;
  do {
    const res = await client.pets.$get({ query: { ...query, ...(cursor ? { cursor } : {}) } });
    if (!res.ok)
      throw Object.assign(new Error(`listPets failed with ${res.status}`), {
        error: await res.json(),
      });
    yield* (await res.json()) as Pet[];
    cursor = nextCursor(res) ?? undefined;
  } while (cursor);
}
