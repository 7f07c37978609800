/**
 * @animal-store/client: a typed client for the Animal Store API, generated from its OpenAPI
 * document (openapi-typescript types, openapi-fetch requests).
 *
 *   const store = createAnimalStoreClient({ baseUrl: "https://api.example.com", apiKey });
 *   const rex = await store.createPet({ name: "Rex", categoryId: 1 }, { idempotencyKey: crypto.randomUUID() });
 *   for await (const pet of store.pets({ status: "available", limit: 100 })) console.log(pet.name);
 *   console.log(store.rateLimit?.windows.day); // the latest response's day window: remaining, reset
 *   console.log((await store.usage()).windows); // both windows, without spending a request
 */
import createFetchClient from "openapi-fetch";
import { type RetryOptions, retryingFetch } from "./retry.js";
import type { components, operations, paths } from "./schema.js";

export { abortableSleep, type RetryOptions, retryAfterMs, retryingFetch } from "./retry.js";
export type { components, operations, paths } from "./schema.js";

export type Pet = components["schemas"]["Pet"];
export type NewPet = components["schemas"]["NewPet"];
export type PetStatus = components["schemas"]["PetStatus"];
/** The body of every error response: `{code, message, status}`. */
export type ErrorBody = components["schemas"]["Error"];
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

/** A response that was not a success, with its `{code, message, status}` body. */
export class AnimalStoreError extends Error {
  override readonly name = "AnimalStoreError";
  readonly status: number;
  readonly code: ErrorBody["code"] | undefined;
  readonly body: unknown;
  readonly response: Response;
  constructor(response: Response, body: unknown) {
    const error = body as Partial<ErrorBody> | undefined;
    super(
      `${response.status} ${error?.code ?? response.statusText}: ${error?.message ?? "request failed"}`,
    );
    this.status = response.status;
    this.code = error?.code;
    this.body = body;
    this.response = response;
  }
  /** Seconds the server asked to wait (Retry-After), if it did. */
  get retryAfter(): number | undefined {
    const v = this.response.headers.get("Retry-After");
    return v && /^\d+$/.test(v) ? Number(v) : undefined;
  }
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
  /** Cancels the request, including any wait between retries. */
  signal?: AbortSignal;
}

export interface CreateOptions extends RequestOptions {
  /**
   * Makes the create safe to retry: the same key and body within 24 h create one pet. Without
   * it the client never retries a create (a dropped connection leaves its outcome unknown).
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

export function createAnimalStoreClient(options: ClientOptions) {
  const { baseUrl, apiKey, headers, ...retry } = options;
  let latest: RateLimit | undefined;
  const onResponse = (res: Response) => {
    latest = readRateLimit(res.headers) ?? latest;
    retry.onResponse?.(res);
  };
  /** The raw openapi-fetch client over the document's paths (relative to `/v1`). */
  const api = createFetchClient<paths>({
    baseUrl: `${baseUrl.replace(/\/+$/, "")}/v1`,
    headers: { ...headers, Authorization: `Bearer ${apiKey}` },
    fetch: retryingFetch({ ...retry, onResponse }),
  });

  const fail = (response: Response, error: unknown): never => {
    throw new AnimalStoreError(response, error);
  };

  async function listPets(
    query: ListPetsQuery = {},
    { signal }: RequestOptions = {},
  ): Promise<Page> {
    const { data, error, response } = await api.GET("/pets", { params: { query }, signal });
    if (!data) return fail(response, error);
    return {
      pets: data,
      nextCursor: nextCursor(response.headers),
      rateLimit: readRateLimit(response.headers),
    };
  }

  return {
    api,
    /** The rate-limit headers of the latest response that had them. */
    get rateLimit(): RateLimit | undefined {
      return latest;
    },
    /** One page of pets (`GET /v1/pets`). */
    listPets,
    /** Every pet matching `status`, fetched page by page as you iterate. */
    async *pets(
      query: Omit<ListPetsQuery, "cursor"> = {},
      options: RequestOptions = {},
    ): AsyncGenerator<Pet, void, undefined> {
      let cursor: string | null = null;
      do {
        const page: Page = await listPets(cursor ? { ...query, cursor } : query, options);
        yield* page.pets;
        cursor = page.nextCursor;
      } while (cursor);
    },
    /** Adds a pet (`POST /v1/pets`); retried only when it carries an `idempotencyKey`. */
    async createPet(pet: NewPet, { idempotencyKey, signal }: CreateOptions = {}): Promise<Pet> {
      const { data, error, response } = await api.POST("/pets", {
        body: pet,
        params: {
          header: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey },
        },
        signal,
      });
      return data ?? fail(response, error);
    },
    /**
     * Your key's plan and limits, both quota windows, any ban, and its last 30 days
     * (`GET /v1/usage`). Free: it does not count against the quota (it has its own small limit).
     */
    async usage({ signal }: RequestOptions = {}): Promise<Usage> {
      const { data, error, response } = await api.GET("/usage", { signal });
      return data ?? fail(response, error);
    },
    /** One pet by id (`GET /v1/pets/{petId}`; deprecated, removed 5 December 2030). */
    async getPet(petId: number, { signal }: RequestOptions = {}): Promise<Pet> {
      const { data, error, response } = await api.GET("/pets/{petId}", {
        params: { path: { petId } },
        signal,
      });
      return data ?? fail(response, error);
    },
  };
}

export type AnimalStoreClient = ReturnType<typeof createAnimalStoreClient>;
