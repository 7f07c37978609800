// @ts-check
// The pure parts of `npm run bench:quota` (../quota.mjs): the schedules of its many-key scenarios,
// what a response's X-Bench-Calls says, and a key's cost from its Durable Object requests as the
// bench entry Worker logs them (GET /__bench/key-calls, bench/api/simulated-network.ts).

/**
 * @typedef {{ limiter: number, d1: number, d1Pets: number, local: number, forwarded: number,
 *   background: number }} BenchCalls  One response's X-Bench-Calls.
 * @typedef {{ at: number, key: number, measured: boolean }} PlannedRequest
 *   A request `at` ms after the schedule's start, of the scenario's `key`-th key; a request not
 *   measured is the key's first (it makes the key known where it is sent).
 * @typedef {{ startAt: number, endAt: number, measured: boolean }} SentRequest
 *   A request as sent (Date.now() when it started and when its answer had been read).
 * @typedef {[number, string, string?]} KeyCall  A Durable Object request of a key:
 *   [Date.now(), hop, method]; hop "start": one of its holders constructed, no request.
 */

/**
 * What docs/quotas.md promises of a key that stopped calling (src/quota/standing.ts, tied by
 * bench/test/quota-scenarios.test.ts): its location holder's calls to the key's object, at most
 * this many per location (`STOPPED_KEY_OBJECT_CALLS`)…
 */
export const STOPPED_KEY_OBJECT_CALLS = 3;
/** …all within this long of its last request (`STANDING_BACKGROUND_ENDS_WITHIN_MS`). */
export const STOPPED_KEY_CALLS_END_WITHIN_MS = 1_921_250;
/**
 * How long the report watches a stopped key's background requests by default (`--tail-seconds`):
 * long enough for the last of them to show.
 */
export const TAIL_SECONDS = Math.ceil(STOPPED_KEY_CALLS_END_WITHIN_MS / 1_000);

/**
 * One response's X-Bench-Calls (`limiter=N, d1=M, d1-pets=P, local=L, forwarded=F, background=B`).
 * Throws on a response without it: every response behind the simulated network carries it.
 * @param {string | null | undefined} header
 * @returns {BenchCalls}
 */
export function benchCallsOrThrow(header) {
  const m = header?.match(
    /^limiter=(\d+), d1=(\d+), d1-pets=(\d+), local=(\d+), forwarded=(\d+), background=(\d+)$/,
  );
  if (!m) throw new Error(`a response without X-Bench-Calls: ${header}`);
  /** @param {number} i */
  const n = (i) => Number(m[i]);
  return {
    limiter: n(1),
    d1: n(2),
    d1Pets: n(3),
    local: n(4),
    forwarded: n(5),
    background: n(6),
  };
}

/**
 * Per 1,000 requests: far calls waited for (the Worker's calls to the key's object its request
 * waited for, plus requests the location holder forwarded), far calls the requests started and
 * did not wait for, local calls (to the location holder).
 * @param {{ calls: string | null }[]} samples
 */
export function callsPerThousandOf(samples) {
  let far = 0;
  let background = 0;
  let local = 0;
  for (const s of samples) {
    const c = benchCallsOrThrow(s.calls);
    far += c.limiter - c.background + c.forwarded;
    background += c.background;
    local += c.local;
  }
  /** @param {number} n */
  const perThousand = (n) => (samples.length ? (1000 * n) / samples.length : NaN);
  return { far: perThousand(far), background: perThousand(background), local: perThousand(local) };
}

/**
 * A location holder held again after an eviction does not use a standing permit within this long
 * of its minute's start or end (`RESTORED_STANDING_MARGIN_MS`, src/objects/holder-standing-memory.ts;
 * tied by bench/test/quota-scenarios.test.ts): a sparse key whose requests arrive there is
 * forwarded each time its holder was evicted.
 */
export const RESTORED_MARGIN_MS = 1_000;

/**
 * Whether a request waited for a far call (a call of the Worker's to the key's object it waited
 * for, or its holder forwarded it).
 * @param {{ calls: string | null }} sample
 */
export function waitedForFarCall(sample) {
  const c = benchCallsOrThrow(sample.calls);
  return c.limiter - c.background + c.forwarded > 0;
}

/**
 * Where in its minute each request started, in seconds from the minute's start to a tenth (the
 * bench's Date.now(), which shares the server's clock), in time order.
 * @param {{ startAt: number }[]} samples
 */
export function secondsIntoMinute(samples) {
  return samples
    .map((s) => s.startAt)
    .sort((a, b) => a - b)
    .map((at) => Math.round((at % 60_000) / 100) / 10);
}

/**
 * The requests that started within `RESTORED_MARGIN_MS` of their minute's start or end.
 * @template {{ startAt: number }} S
 * @param {S[]} samples
 */
export function nearMinuteEdge(samples) {
  return samples.filter((s) => {
    const into = s.startAt % 60_000;
    return into < RESTORED_MARGIN_MS || into >= 60_000 - RESTORED_MARGIN_MS;
  });
}

/**
 * How many keys calling every `gapMs`, and how many measured requests each, give `samples`
 * measured requests within `spanMs`: each key makes as many as fit in the span (at least one),
 * and there are as many keys as it takes.
 * @param {{ gapMs: number, spanMs: number, samples: number }} spec
 */
export function keysForSamples({ gapMs, spanMs, samples }) {
  const requestsPerKey = Math.max(1, Math.floor(spanMs / gapMs));
  return { keys: Math.ceil(samples / requestsPerKey), requestsPerKey };
}

/**
 * The requests of `keys` keys each calling every `gapMs`: each key's first `warmup` requests (not
 * measured: its start-up), then `requestsPerKey` measured ones, `gapMs` apart. The keys start `spreadMs / keys` apart after
 * `offsetMs`, so their requests interleave instead of arriving together. Sorted by time; `key`
 * counts from `firstKey`.
 * @param {{ gapMs: number, keys: number, requestsPerKey: number, spreadMs: number,
 *   offsetMs?: number, firstKey?: number, warmup?: number }} spec
 * @returns {PlannedRequest[]}
 */
export function sparsePlan({
  gapMs,
  keys,
  requestsPerKey,
  spreadMs,
  offsetMs = 0,
  firstKey = 0,
  warmup = 1,
}) {
  /** @type {PlannedRequest[]} */
  const out = [];
  for (let k = 0; k < keys; k++) {
    const first = offsetMs + Math.round((k * spreadMs) / keys);
    for (let n = 0; n < warmup + requestsPerKey; n++)
      out.push({ at: first + n * gapMs, key: firstKey + k, measured: n >= warmup });
  }
  return byTime(out);
}

/**
 * Several schedules as one, in time order (ties keep their order).
 * @template {{ at: number }} T
 * @param {T[]} requests
 * @returns {T[]}
 */
export function byTime(requests) {
  return requests
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.at - b.r.at || a.i - b.i)
    .map(({ r }) => r);
}

/**
 * What one key's Durable Object requests cost, from its requests as sent (in time order) and its
 * calls (GET /__bench/key-calls), observed until `observedUntil`:
 * - `window`: its calls while it was calling, from the end of its last request before the first
 *   measured one (or the first measured one's start, when it had none) to the end of its last
 *   request, so a key measured for n requests is charged for n gaps (the background work between
 *   them included); `windowByKind` counts them by hop and method (`relayed renewLease`), over
 *   `windowMs`;
 * - `tail`: its calls after its last request (the background work that goes on once it stops),
 *   by hop (`tailByHop`), and how long after that request's end the last of them started (null:
 *   none);
 * - `observedMs`: how long after its last request its calls were observed;
 * - `starts`: its location holders constructed in `window` (hop "start": a holder new, or evicted
 *   from memory since its last call, started again), counted apart from its DO requests.
 * @param {SentRequest[]} sent
 * @param {KeyCall[]} calls
 * @param {number} observedUntil
 */
export function keyCost(sent, calls, observedUntil) {
  const firstMeasured = sent.findIndex((r) => r.measured);
  const first = sent[firstMeasured];
  const last = sent[sent.length - 1];
  if (!first || !last) throw new Error("a key without a measured request");
  const before = sent[firstMeasured - 1];
  const from = before ? before.endAt : first.startAt - 1;
  const until = last.endAt;
  let window = 0;
  let starts = 0;
  /** @type {Record<string, number>} */
  const windowByKind = {};
  let tail = 0;
  let lastTailAt = -Infinity;
  /** @type {Record<string, number>} */
  const tailByHop = {};
  for (const [at, hop, method] of calls) {
    if (hop === "start") starts += at > from && at <= until ? 1 : 0;
    else if (at > from && at <= until) {
      window++;
      const kind = method ? `${hop} ${method}` : hop;
      windowByKind[kind] = (windowByKind[kind] ?? 0) + 1;
    } else if (at > until) {
      tail++;
      tailByHop[hop] = (tailByHop[hop] ?? 0) + 1;
      lastTailAt = Math.max(lastTailAt, at);
    }
  }
  return {
    measured: sent.filter((r) => r.measured).length,
    window,
    windowByKind,
    windowMs: until - from,
    starts,
    tail,
    tailByHop,
    lastTailAfterMs: tail ? lastTailAt - until : null,
    observedMs: observedUntil - until,
  };
}

/**
 * A scenario's cost over its keys (`keyCost` of each): Durable Object requests and holder starts
 * per 1,000 measured requests; after each key's last request, its calls (mean and most per key, and the mean by hop;
 * and the most to the key's object for one key),
 * and the time until the last of them (the longest over the keys, null if none made any),
 * observed for at least `observedMs`.
 * @param {ReturnType<typeof keyCost>[]} costs
 */
export function scenarioCost(costs) {
  const measured = costs.reduce((n, c) => n + c.measured, 0);
  const window = costs.reduce((n, c) => n + c.window, 0);
  const tails = costs.map((c) => c.tail);
  const lasts = costs.map((c) => c.lastTailAfterMs).filter((ms) => ms !== null);
  /** @type {Record<string, number>} */
  const tailByHop = {};
  for (const c of costs)
    for (const [hop, n] of Object.entries(c.tailByHop))
      tailByHop[hop] = (tailByHop[hop] ?? 0) + n / costs.length;
  // While calling, by kind: per minute of each key's window, summed over the keys.
  const windowMinutes = costs.reduce((m, c) => m + c.windowMs, 0) / 60_000;
  /** @type {Record<string, number>} */
  const perMinuteByKind = {};
  for (const c of costs)
    for (const [kind, n] of Object.entries(c.windowByKind))
      perMinuteByKind[kind] = (perMinuteByKind[kind] ?? 0) + n / windowMinutes;
  return {
    perMinuteByKind,
    doPerThousand: measured ? (1000 * window) / measured : NaN,
    startsPerThousand: measured ? (1000 * costs.reduce((n, c) => n + c.starts, 0)) / measured : NaN,
    tailPerKey: costs.length ? tails.reduce((a, b) => a + b, 0) / costs.length : NaN,
    tailMostPerKey: costs.length ? Math.max(...tails) : NaN,
    // The calls that reach the key's object (a holder's relayed hand-backs and refills, the
    // Worker's own): what docs/quotas.md bounds (STOPPED_KEY_OBJECT_CALLS per location).
    tailToObjectMostPerKey: costs.length
      ? Math.max(...costs.map((c) => (c.tailByHop.relayed ?? 0) + (c.tailByHop.limiter ?? 0)))
      : NaN,
    tailByHop,
    lastTailAfterMs: lasts.length ? Math.max(...lasts) : null,
    observedMs: costs.length ? Math.min(...costs.map((c) => c.observedMs)) : NaN,
  };
}
