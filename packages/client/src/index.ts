/**
 * @animal-store/client: a typed client for the Animal Store API, generated from its OpenAPI
 * document (openapi-typescript types, openapi-fetch requests).
 *
 *   const store = createAnimalStoreClient({ baseUrl: "https://api.example.com", apiKey });
 *   const rex = await store.createPet({ name: "Rex", categoryId: 1 }); // retried safely: it carries an Idempotency-Key
 *   for await (const pet of store.listAllPets({ status: "available" })) console.log(pet.name);
 *   console.log(store.rateLimit?.windows.day); // the latest response's day window: remaining, reset
 *   console.log((await store.usage()).windows); // both windows, without spending a request
 */
import openapiFetch from "openapi-fetch";
import { ApiError, apiErrorFor } from "./errors.js";
import { type RetryOptions, retryingFetch } from "./retry.js";
import type { components, operations, paths } from "./schema.js";

export {
  ApiError,
  type ErrorBody,
  type ErrorCode,
  NetworkError,
  type ParsedErrorBody,
  parseErrorBody,
  RateLimitError,
  TimeoutError,
} from "./errors.js";
export {
  abortableSleep,
  fullJitterBackoffMs,
  RETRY_DEFAULTS,
  type RetryOptions,
  retryAfterMs,
  retryingFetch,
} from "./retry.js";
export type { components, operations, paths } from "./schema.js";

/** @deprecated The former name of `ApiError`. */
export const AnimalStoreError = ApiError;
/** @deprecated The former name of `ApiError`. */
export type AnimalStoreError = ApiError;

/**
 * openapi-fetch's `createClient`. The ESM build's default import is the function itself; the
 * CommonJS build's is openapi-fetch's `module.exports` (Node semantics, as this package is
 * `"type": "module"`), whose `default` is the function.
 */
const createFetchClient: typeof openapiFetch =
  (openapiFetch as unknown as { default?: typeof openapiFetch }).default ?? openapiFetch;

export type Pet = components["schemas"]["Pet"];
export type NewPet = components["schemas"]["NewPet"];
export type PetStatus = components["schemas"]["PetStatus"];
export type ListPetsQuery = NonNullable<operations["listPets"]["parameters"]["query"]>;
/** Your key's plan, quota windows, ban and last 30 days (`GET /v1/usage`). */
export type Usage = components["schemas"]["Usage"];

/** One quota window of the IETF `RateLimit` and `RateLimit-Policy` headers. */
export interface RateLimitWindow {
  /** `q` of RateLimit-Policy: requests allowed in the window (undefined if the policy lacks it). */
  limit: number | undefined;
  /** `r` of RateLimit: requests left in the window. */
  remaining: number;
  /** `t` of RateLimit: seconds until the window resets. */
  resetSeconds: number;
  /** `w` of RateLimit-Policy: the window's length in seconds (undefined if the policy lacks it). */
  windowSeconds: number | undefined;
}

/** `"name";key=value;…` items of a structured-field list, as name → {key: number}. */
function parseItems(header: string | null): Map<string, Record<string, number>> {
  const items = new Map<string, Record<string, number>>();
  for (const item of (header ?? "").split(",")) {
    const [rawName, ...params] = item.split(";").map((part) => part.trim());
    const name = rawName?.replace(/^"(.*)"$/, "$1");
    if (!name) continue;
    const values: Record<string, number> = {};
    for (const param of params) {
      const [key, value] = param.split("=");
      if (key && value !== undefined && /^-?\d+$/.test(value.trim()))
        values[key.trim()] = Number(value);
    }
    items.set(name, values);
  }
  return items;
}

/**
 * Every window of the IETF `RateLimit` header (`"minute";r=299;t=42, "day";r=9999;t=50000`),
 * with its limit and length from `RateLimit-Policy`, by name (`minute`, `day`).
 */
export function parseRateLimitWindows(
  rateLimit: string | null,
  policy: string | null,
): Record<string, RateLimitWindow> {
  const policies = parseItems(policy);
  const windows: Record<string, RateLimitWindow> = {};
  for (const [name, { r, t }] of parseItems(rateLimit)) {
    if (r === undefined || t === undefined) continue;
    const p = policies.get(name);
    windows[name] = { limit: p?.q, remaining: r, resetSeconds: t, windowSeconds: p?.w };
  }
  return windows;
}

/** The rate-limit headers of one response (absent when the limiter was not consulted). */
export interface RateLimit {
  /** X-RateLimit-Limit: the limit of the window closest to exhaustion. */
  limit: number;
  /** X-RateLimit-Remaining: requests left in that window. */
  remaining: number;
  /** X-RateLimit-Reset: Unix time (seconds) when that window resets. */
  reset: number;
  /** The IETF `RateLimit` header, every window (e.g. `"minute";r=299;t=42, "day";r=9999;t=50000`). */
  rateLimit: string | null;
  /** The IETF `RateLimit-Policy` header (e.g. `"minute";q=300;w=60, "day";q=10000;w=86400`). */
  policy: string | null;
  /** Both windows of the IETF headers, parsed: `windows.minute`, `windows.day`. */
  windows: Record<string, RateLimitWindow>;
}

/** The rate-limit headers of `headers`, or undefined when it has none. */
export function readRateLimit(headers: Headers): RateLimit | undefined {
  const [limit, remaining, reset] = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
  ].map((h) => headers.get(h));
  if (limit == null || remaining == null || reset == null) return undefined;
  return {
    limit: Number(limit),
    remaining: Number(remaining),
    reset: Number(reset),
    rateLimit: headers.get("RateLimit"),
    policy: headers.get("RateLimit-Policy"),
    windows: parseRateLimitWindows(headers.get("RateLimit"), headers.get("RateLimit-Policy")),
  };
}

export interface ClientOptions extends RetryOptions {
  /** The API's origin, e.g. `https://api.example.com` (the client adds `/v1`). */
  baseUrl: string;
  /** Your API key (`pet_live_…` or `pet_test_…`). */
  apiKey: string;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
}

export interface RequestOptions {
  /** Cancels the request, including any wait between retries (its reason is thrown as it is). */
  signal?: AbortSignal;
}

export interface CreateOptions extends RequestOptions {
  /**
   * The create's `Idempotency-Key`: the same key and body within 24 h create one pet. The client
   * makes one up (a random UUID) when you give none, so its own retries are safe; pass your own to
   * retry the create yourself after the call failed.
   */
  idempotencyKey?: string;
}

export interface Page {
  pets: Pet[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
  rateLimit: RateLimit | undefined;
}

/** The `cursor` of a `Link: <…>; rel="next"` header, or null when there is none. */
export function nextCursor(headers: Headers): string | null {
  const next = headers.get("Link")?.match(/<([^>]+)>\s*;\s*rel="next"/)?.[1];
  return next ? new URL(next, "http://relative.invalid").searchParams.get("cursor") : null;
}

/**
 * `fetch` that gives every POST an `Idempotency-Key` (a random UUID) unless it has one, so the
 * retrying fetch behind it may repeat it: the API creates one pet per key and body.
 */
function withIdempotencyKey(next: typeof fetch): typeof fetch {
  return (input, init) => {
    const request = new Request(input, init);
    if (request.method !== "POST" || request.headers.has("Idempotency-Key")) return next(request);
    const headers = new Headers(request.headers);
    headers.set("Idempotency-Key", crypto.randomUUID());
    return next(new Request(request, { headers }));
  };
}

export function createAnimalStoreClient(options: ClientOptions) {
  const { baseUrl, apiKey, headers, ...retry } = options;
  let latest: RateLimit | undefined;
  const onResponse = (res: Response) => {
    // The key's windows name the day (or the "fallback" allowance); a usage-read refusal and an
    // authentication failure carry a limit of their own ("minute" alone), kept out of it.
    const read = readRateLimit(res.headers);
    if (read && (read.windows.day || read.windows.fallback)) latest = read;
    retry.onResponse?.(res);
  };
  /** The raw openapi-fetch client over the document's paths (relative to `/v1`). */
  const api = createFetchClient<paths>({
    baseUrl: `${baseUrl.replace(/\/+$/, "")}/v1`,
    headers: { ...headers, Authorization: `Bearer ${apiKey}` },
    fetch: withIdempotencyKey(retryingFetch({ ...retry, onResponse })),
  });

  const throwApiError = (response: Response, error: unknown): never => {
    throw apiErrorFor(response, error);
  };

  async function listPets(
    query: ListPetsQuery = {},
    { signal }: RequestOptions = {},
  ): Promise<Page> {
    const { data, error, response } = await api.GET("/pets", { params: { query }, signal });
    if (!data) return throwApiError(response, error);
    return {
      pets: data,
      nextCursor: nextCursor(response.headers),
      rateLimit: readRateLimit(response.headers),
    };
  }

  /** Every pet matching `query`, page by page as you iterate, following the `Link` cursors. */
  async function* listAllPets(
    query: Omit<ListPetsQuery, "cursor"> = {},
    options: RequestOptions = {},
  ): AsyncGenerator<Pet, void, undefined> {
    let cursor: string | null = null;
    do {
      const page: Page = await listPets(cursor ? { ...query, cursor } : query, options);
      yield* page.pets;
      cursor = page.nextCursor;
    } while (cursor);
  }

  return {
    api,
    /**
     * The parsed quota headers of the latest response that described the key's windows (every
     * counted answer does; a usage-read 429 or an authentication failure describes its own limit).
     */
    get rateLimit(): RateLimit | undefined {
      return latest;
    },
    /** One page of pets (`GET /v1/pets`). */
    listPets,
    /** Every pet matching `query` (`status`, `limit` per page), fetched page by page as you iterate. */
    listAllPets,
    /** @deprecated The former name of `listAllPets`. */
    pets: listAllPets,
    /**
     * Adds a pet (`POST /v1/pets`). It always carries an `Idempotency-Key` (yours, or one the
     * client makes up), so a retry after a lost answer returns the same pet instead of a second.
     */
    async createPet(pet: NewPet, { idempotencyKey, signal }: CreateOptions = {}): Promise<Pet> {
      const { data, error, response } = await api.POST("/pets", {
        body: pet,
        params: {
          // Without one, withIdempotencyKey gives the request a random key.
          header: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey },
        },
        signal,
      });
      return data ?? throwApiError(response, error);
    },
    /**
     * Your key's plan and limits, both quota windows, any ban, and its last 30 days
     * (`GET /v1/usage`). Free: it does not count against the quota (it has its own small limit).
     */
    async usage({ signal }: RequestOptions = {}): Promise<Usage> {
      const { data, error, response } = await api.GET("/usage", { signal });
      return data ?? throwApiError(response, error);
    },
    /** One pet by id (`GET /v1/pets/{petId}`; deprecated, removed 5 December 2030). */
    async getPet(petId: number, { signal }: RequestOptions = {}): Promise<Pet> {
      const { data, error, response } = await api.GET("/pets/{petId}", {
        params: { path: { petId } },
        signal,
      });
      return data ?? throwApiError(response, error);
    },
  };
}

export type AnimalStoreClient = ReturnType<typeof createAnimalStoreClient>;
