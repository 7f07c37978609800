import { clock } from "../lib/clock";
import { ExpiringMap } from "../lib/expiring-map";
import { log } from "../lib/log";
import type { Pet, PetStatus } from "../schemas/pets";

/**
 * Answers that can never change, kept in two tiers so that repeating them reads no D1: this
 * isolate's memory, then the Cache API (shared by the Workers of one Cloudflare location).
 *
 * Why they cannot change: pets are only ever inserted (test/architecture.test.ts fails on any SQL
 * in src/ that updates or deletes them), and D1 has one writer, so ids are assigned and committed
 * in increasing order and every replica holds a prefix of them. Hence
 * - a found pet stays as it is;
 * - a *full* page, the `limit` pets after `afterId` for a status filter read together with one
 *   more (so the page has a next), is the same on every replica forever: any pet added later has
 *   a larger id and lands on a later page.
 * A tail page (no next yet) and a pet not found can change; they are never stored here.
 *
 * Every key starts with the environment and PAGE_CACHE_EPOCH: an operator who edits pets by hand
 * bumps the epoch, and every entry stored before is ignored from then on.
 */
export interface PageKey {
  status: PetStatus | undefined;
  afterId: number;
  limit: number;
}

/** Where a stored answer came from, for Server-Timing. */
type CacheTier = "isolate" | "colo";

export interface CacheScope {
  environment: string;
  epoch: string;
}

// Bounded: at most this many answers per isolate (a page is at most 100 pets), oldest out first.
const MAX_PAGES_IN_ISOLATE = 256;
const MAX_PETS_IN_ISOLATE = 4_096;
// The Cache API may drop entries whenever it likes; this only says how long it may keep them.
const COLO_MAX_AGE_S = 7 * 24 * 3_600;

// A named cache of its own, apart from the zone's default cache of HTTP responses. Opened once;
// a failed open is retried on the next use rather than remembered.
let coloCache: Promise<Cache> | undefined;
function openColoCache(): Promise<Cache> {
  if (!coloCache) {
    const opening = (async () => caches.open("immutable-reads"))();
    coloCache = opening;
    opening.catch(() => {
      if (coloCache === opening) coloCache = undefined;
    });
  }
  return coloCache;
}

const pagesInIsolate = new ExpiringMap<string, Pet[]>(MAX_PAGES_IN_ISOLATE);
const petsInIsolate = new ExpiringMap<string, Pet>(MAX_PETS_IN_ISOLATE);

// Pages this isolate read from D1 as a tail (no next yet), for a while: asking the location's
// cache for one again would almost surely miss (a tail is never stored, and it fills only as pets
// with its status are added), and each miss is a Cache API round trip before the D1 read. D1
// answers them instead, and stores the page as soon as it reads it full. The mark expires so
// that a page another isolate has since stored is found in the cache again (during a D1 outage
// too); losing it only costs one cache lookup.
const tailsInIsolate = new ExpiringMap<string, true>(MAX_PAGES_IN_ISOLATE);
const TAIL_MARK_MS = 60_000;

// Part of every key: bump it when the stored JSON changes shape (a new Pet field), so a deploy
// never reads entries an older version wrote.
const FORMAT = "v1";
const prefix = (scope: CacheScope) =>
  `https://immutable-reads.invalid/${FORMAT}/${encodeURIComponent(scope.environment)}/${encodeURIComponent(scope.epoch)}`;

/** The Cache API key of a full page. Not a URL anyone can fetch: only this Worker reads it. */
export function pageCacheUrl(scope: CacheScope, { status, afterId, limit }: PageKey): string {
  // The query URLSearchParams would write (a status is a plain word, the rest whole numbers),
  // spelled out: it is worked out for every list request.
  return `${prefix(scope)}/page?status=${status ?? ""}&after=${afterId}&limit=${limit}`;
}

/** The Cache API key of a found pet. */
function petCacheUrl(scope: CacheScope, id: number): string {
  return `${prefix(scope)}/pet/${id}`;
}

/**
 * A stored answer: from this isolate, else (when `searchColo`, as by default) from the location's
 * cache, else undefined.
 */
async function lookup<T>(
  memory: ExpiringMap<string, T>,
  url: string,
  { searchColo = true }: { searchColo?: boolean } = {},
): Promise<{ value: T; tier: CacheTier } | undefined> {
  const inMemory = memory.get(url, 0);
  if (inMemory !== undefined) return { value: inMemory, tier: "isolate" };
  if (!searchColo) return undefined;
  let hit: Response | undefined;
  try {
    hit = await (await openColoCache()).match(url);
  } catch (err) {
    // The cache is an optimisation: when it fails, D1 answers.
    log("warn", "cache lookup failed", { error: String(err) });
    return undefined;
  }
  if (!hit) return undefined;
  const value = (await hit.json()) as T;
  memory.set(url, value, Infinity);
  return { value, tier: "colo" };
}

function store<T>(
  memory: ExpiringMap<string, T>,
  url: string,
  value: T,
  waitUntil: (work: Promise<unknown>) => void,
): void {
  memory.set(url, value, Infinity);
  const response = new Response(JSON.stringify(value), {
    headers: {
      "Content-Type": "application/json",
      "Cache-Control": `public, max-age=${COLO_MAX_AGE_S}, immutable`,
    },
  });
  // After the answer: the client does not wait for the location's cache to take it.
  waitUntil(
    openColoCache()
      .then((cache) => cache.put(url, response))
      .catch((err: unknown) => {
        log("warn", "cache store failed", { error: String(err) });
      }),
  );
}

/**
 * One page's place in the cache, its key worked out once for the request that reads it: look it
 * up, then store it if D1 answered with a full page, or note that D1 answered with a tail.
 */
export function pageSlot(scope: CacheScope, key: PageKey) {
  const url = pageCacheUrl(scope, key);
  return {
    /** The stored full page (the location's cache is skipped while the page is marked a tail). */
    stored: () =>
      lookup(pagesInIsolate, url, { searchColo: !tailsInIsolate.get(url, clock.now()) }),
    /** Notes that D1 answered with a tail page: see tailsInIsolate. */
    noteTail: (): void => {
      tailsInIsolate.set(url, true, clock.now() + TAIL_MARK_MS);
    },
    /** Stores a full page: exactly `key.limit` pets, read together with a next one. */
    storeFull: (pets: Pet[], waitUntil: (work: Promise<unknown>) => void): void => {
      if (pets.length !== key.limit) throw new Error("only a full page can be stored");
      tailsInIsolate.delete(url);
      store(pagesInIsolate, url, pets, waitUntil);
    },
  };
}

export const storedPet = (scope: CacheScope, id: number) =>
  lookup(petsInIsolate, petCacheUrl(scope, id));

export function storeFoundPet(
  scope: CacheScope,
  pet: Pet,
  waitUntil: (work: Promise<unknown>) => void,
): void {
  store(petsInIsolate, petCacheUrl(scope, pet.id), pet, waitUntil);
}
