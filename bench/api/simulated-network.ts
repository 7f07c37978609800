import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The bench's simulated network (bench/api/index.ts): locally the key's Durable Object and D1 are
 * in the same process as the Worker, so a hop costs CPU but no network time. With a round trip
 * above 0 for a binding, the bindings are wrapped once per isolate so that every call to a
 * QuotaLimiter and every D1 query (each statement run, or one batch) waits that long, half before
 * and half after, like a round trip. Each response then says how many of each its
 * request made, in `X-Bench-Calls: limiter=N, d1=M, d1-pets=P, local=L, forwarded=F, background=B`
 * (L calls to the key's holder in the request's location, F of them answered by forwarding to the
 * key's object, a far round trip the request waited for; B of the N limiter calls still on their
 * way when the response was ready: started by the request, not waited for, like a background
 * lease renewal): P of the M D1 round trips read
 * or wrote pets (a statement, or a batch with a statement, that names the pets table); the
 * others are key records and operator data. Work the request left running after its response
 * (`waitUntil`, e.g. a key re-read) is counted only if it started before the header was set.
 *
 * Off (every round trip 0) the Worker gets its real bindings and this module does nothing per
 * request.
 *
 * A new distance is one more field here, a `Hop` that names it, and the wrapping of whatever it
 * delays in `envBehindSimulatedNetwork` (or around the whole request in
 * `fetchBehindSimulatedNetwork`).
 */
export interface SimulatedNetwork {
  /** Round trip of every call to a key's QuotaLimiter (a Durable Object, far away), in ms. */
  limiterMs: number;
  /** Round trip of every D1 query or batch, in ms. */
  d1Ms: number;
  /** Round trip of every call to a key's QuotaHolder (in the request's own location), in ms. */
  localMs: number;
}

/**
 * What a round trip goes to: a key's QuotaLimiter from the Worker ("limiter") or from a location
 * holder ("relayed"), D1, a key's holder in the request's location ("local"), or a key's holder
 * from the key's QuotaLimiter ("pushed": a change or anything else the object sends its holders,
 * over the far round trip). "alarm" is no round trip: an alarm of a key's object or holder, counted because
 * an alarm invocation is a Durable Object request too.
 */
export type Hop = "limiter" | "relayed" | "d1" | "local" | "pushed" | "alarm";

/** Hops that are Durable Object requests (every one but D1). */
export const DURABLE_OBJECT_HOPS: readonly Hop[] = [
  "limiter",
  "relayed",
  "local",
  "pushed",
  "alarm",
];

const BENCH_CALLS_HEADER = "X-Bench-Calls";

interface Calls {
  limiter: number;
  d1: number;
  d1Pets: number;
  local: number;
  /** Calls to the location holder that it answered by forwarding to the key's object. */
  forwarded: number;
  /** Limiter calls of the request not answered yet. */
  limiterInFlight: number;
}

/**
 * Every simulated round trip since the Worker's isolate started, by hop, whichever request or
 * object made it (a location holder's background renewals included): the bench reads them
 * (GET /__bench/calls) before and after a scenario to count Durable Object requests.
 */
export const callTotals: Record<Hop, number> = {
  limiter: 0,
  relayed: 0,
  d1: 0,
  local: 0,
  pushed: 0,
  alarm: 0,
};

/**
 * Every Durable Object request since the isolate started, by key: for each key id, its calls as
 * `[Date.now() when the call started, hop, method]`, whoever made them (the Worker, a holder, the key's
 * object). The bench (GET /__bench/key-calls) attributes them to its scenarios' keys and to the
 * time after a key's last request, and by kind (hop and method). An object is a key's when its name is the key id (the key's
 * QuotaLimiter) or starts with it and "@" (a holder, `<key id>@<colo>`).
 */
export const callsByKey = new Map<string, [number, Hop | "start", string][]>();

/** The key id an object's name belongs to (see `callsByKey`), or null for another object. */
export function keyIdOfObject(name: string | undefined): string | null {
  if (!name) return null;
  const at = name.indexOf("@");
  return at === -1 ? name : name.slice(0, at);
}

/**
 * Records a Durable Object request to a key's object or holder (see `callsByKey`), or, as "start",
 * a holder constructed (new, or evicted from memory since): no request of its own.
 */
export function recordKeyCall(
  objectName: string | undefined,
  hop: Hop | "start",
  method: string,
): void {
  const keyId = keyIdOfObject(objectName);
  if (keyId === null) return;
  let log = callsByKey.get(keyId);
  if (!log) callsByKey.set(keyId, (log = []));
  log.push([Date.now(), hop, method]);
}

/** Whether SQL names the pets table (pets themselves, not key records or operator data). */
const PETS_TABLE = /\bpets\b/i;

const callsOfRequest = new AsyncLocalStorage<Calls>();
/** Each env wrapped once, per kind of caller (the same env object may reach all three). */
const wrapped = {
  worker: new WeakMap<Env, Env>(),
  holder: new WeakMap<Env, Env>(),
  limiter: new WeakMap<Env, Env>(),
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `call` as a round trip of `rttMs`, counted against the current request: half the round
 * trip before the call, the rest after it.
 *
 * A timer never fires early but often late: in wrangler dev on the 2-core bench machine,
 * setTimeout(15) took 16.4 ms on average by Date.now(), so two sleeps of rtt/2 added ~rtt + 3 ms,
 * not rtt. The second sleep therefore waits only what the first left of rtt. Date.now() counts
 * whole milliseconds, so the first half may have lasted up to 1 ms less than it reads: the extra
 * 1 ms keeps the total delay at rtt or more (the second timer's own lateness cannot be taken
 * back, and is not). Real time, like the timers: not the product's clock, which tests move at will.
 */
async function roundTrip<T>(
  rttMs: number,
  kind: Hop,
  call: () => Promise<T>,
  {
    touchesPets,
    objectName,
    method = "",
  }: { touchesPets?: boolean; objectName?: string; method?: string } = {},
): Promise<T> {
  callTotals[kind]++;
  if (kind !== "d1") recordKeyCall(objectName, kind, method);
  const calls = callsOfRequest.getStore();
  // A holder's or the key's object's own calls belong to no one request.
  if (calls && (kind === "limiter" || kind === "d1" || kind === "local")) {
    calls[kind]++;
    if (touchesPets) calls.d1Pets++;
  }
  const inFlight = calls && kind === "limiter";
  if (inFlight) calls.limiterInFlight++;
  try {
    const start = Date.now();
    await sleep(rttMs / 2);
    const firstHalfMs = Date.now() - start;
    const result = await call();
    await sleep(Math.max(0, rttMs - firstHalfMs + 1));
    return result;
  } finally {
    if (inFlight) calls.limiterInFlight--;
  }
}

/**
 * Whether a location holder's decision came from the key's object (see objects/quota-holder.ts):
 * its `admit` answer, or the decision inside an `authenticateAndAdmit` answer.
 */
const forwardedByHolder = (answer: unknown): boolean => {
  if (typeof answer !== "object" || answer === null) return false;
  const decided = "answer" in answer ? (answer as { answer: unknown }).answer : answer;
  return (
    typeof decided === "object" &&
    decided !== null &&
    (decided as { reached?: unknown }).reached === true &&
    (decided as { fromStock?: unknown }).fromStock === false
  );
};

/** A Durable Object stub whose method calls are delayed round trips to `hop`. */
function delayedStub<T extends object>(
  stub: T,
  rttMs: number,
  hop: Hop,
  objectName: string | undefined,
): T {
  return new Proxy(stub, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      // `then` must stay undefined, or awaiting the stub would call the object.
      if (typeof prop !== "string" || prop === "then" || typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const calls = callsOfRequest.getStore();
        const answer = await roundTrip(
          rttMs,
          hop,
          () => Reflect.apply(value, target, args) as Promise<unknown>,
          { objectName, method: prop },
        );
        if (calls && hop === "local" && forwardedByHolder(answer)) calls.forwarded++;
        return answer;
      };
    },
  });
}

function delayedNamespace<T extends object>(namespace: T, rttMs: number, hop: Hop): T {
  return new Proxy(namespace, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (prop === "getByName" || prop === "get")
        return (...args: unknown[]) =>
          delayedStub(
            Reflect.apply(value as (...a: unknown[]) => object, target, args),
            rttMs,
            hop,
            typeof args[0] === "string" ? args[0] : (args[0] as DurableObjectId | undefined)?.name,
          );
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const RUNS = new Set(["first", "all", "run", "raw"]);

/** The real statement behind a delayed one, for `batch`, which needs D1's own objects. */
const realStatements = new WeakMap<object, D1PreparedStatement>();

/** Delayed statements that name the pets table. */
const petsStatements = new WeakSet<object>();

function delayedStatement(
  stmt: D1PreparedStatement,
  rttMs: number,
  touchesPets: boolean,
): D1PreparedStatement {
  const proxy = new Proxy(stmt, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      if (prop === "bind")
        return (...args: unknown[]) =>
          delayedStatement(
            Reflect.apply(value, target, args) as D1PreparedStatement,
            rttMs,
            touchesPets,
          );
      if (typeof prop === "string" && RUNS.has(prop))
        return (...args: unknown[]) =>
          roundTrip(rttMs, "d1", () => Reflect.apply(value, target, args) as Promise<unknown>, {
            touchesPets,
          });
      return value.bind(target);
    },
  });
  realStatements.set(proxy, stmt);
  if (touchesPets) petsStatements.add(proxy);
  return proxy;
}

function delayedQueryable<T extends D1Database | D1DatabaseSession>(db: T, rttMs: number): T {
  return new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (prop === "prepare")
        return (sql: string) => delayedStatement(target.prepare(sql), rttMs, PETS_TABLE.test(sql));
      if (prop === "batch")
        return (stmts: D1PreparedStatement[]) =>
          roundTrip(rttMs, "d1", () => target.batch(stmts.map((s) => realStatements.get(s) ?? s)), {
            touchesPets: stmts.some((s) => petsStatements.has(s)),
          });
      if (prop === "withSession")
        return (...args: unknown[]) =>
          delayedQueryable(
            Reflect.apply(value as (...a: unknown[]) => D1DatabaseSession, target, args),
            rttMs,
          );
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * `env` with its QUOTA, QUOTA_HOLDER and DB bindings behind the simulated network (made once per
 * env object); a binding whose round trip is 0 is left as it is (and its calls are not counted).
 */
function envBehindSimulatedNetwork(env: Env, rtt: SimulatedNetwork): Env {
  const known = wrapped.worker.get(env);
  if (known) return known;
  const result: Env = {
    ...env,
    QUOTA: rtt.limiterMs > 0 ? delayedNamespace(env.QUOTA, rtt.limiterMs, "limiter") : env.QUOTA,
    QUOTA_HOLDER:
      rtt.localMs > 0 ? delayedNamespace(env.QUOTA_HOLDER, rtt.localMs, "local") : env.QUOTA_HOLDER,
    DB: rtt.d1Ms > 0 ? delayedQueryable(env.DB, rtt.d1Ms) : env.DB,
  };
  wrapped.worker.set(env, result);
  return result;
}

/**
 * A location holder's `env` with the key's QuotaLimiter behind the far round trip and D1 behind
 * its round trip (the holder reads a key it has no copy of): the calls it forwards and its
 * background renewals are "relayed" hops, its key reads "d1" hops (counted in `callTotals` only,
 * since the holder's calls belong to no one request).
 */
export function holderEnvBehindSimulatedNetwork(env: Env, rtt: SimulatedNetwork): Env {
  const known = wrapped.holder.get(env);
  if (known) return known;
  if (rtt.limiterMs === 0 && rtt.d1Ms === 0) return env;
  const result: Env = {
    ...env,
    QUOTA: rtt.limiterMs > 0 ? delayedNamespace(env.QUOTA, rtt.limiterMs, "relayed") : env.QUOTA,
    DB: rtt.d1Ms > 0 ? delayedQueryable(env.DB, rtt.d1Ms) : env.DB,
  };
  wrapped.holder.set(env, result);
  return result;
}

/**
 * The key's QuotaLimiter's `env` with its calls to the key's holders (pushes) behind the far round
 * trip, counted as "pushed" hops (in `callTotals` and `callsByKey` only). Unchanged when the far
 * round trip is 0.
 */
export function limiterEnvBehindSimulatedNetwork(env: Env, rtt: SimulatedNetwork): Env {
  const known = wrapped.limiter.get(env);
  if (known) return known;
  if (rtt.limiterMs === 0) return env;
  const result: Env = {
    ...env,
    QUOTA_HOLDER: delayedNamespace(env.QUOTA_HOLDER, rtt.limiterMs, "pushed"),
  };
  wrapped.limiter.set(env, result);
  return result;
}

/**
 * Serves `request` with `env` behind the simulated network, and adds `X-Bench-Calls` (the
 * limiter calls and D1 queries the request made) to the response.
 */
export async function fetchBehindSimulatedNetwork(
  serve: (request: Request, env: Env) => Promise<Response>,
  request: Request,
  env: Env,
  rtt: SimulatedNetwork,
): Promise<Response> {
  if (Object.values(rtt).every((ms) => ms === 0)) return serve(request, env);
  const calls: Calls = {
    limiter: 0,
    d1: 0,
    d1Pets: 0,
    local: 0,
    forwarded: 0,
    limiterInFlight: 0,
  };
  const response = await callsOfRequest.run(calls, () =>
    serve(request, envBehindSimulatedNetwork(env, rtt)),
  );
  const counted = new Response(response.body, response);
  counted.headers.set(
    BENCH_CALLS_HEADER,
    `limiter=${calls.limiter}, d1=${calls.d1}, d1-pets=${calls.d1Pets}, ` +
      `local=${calls.local}, forwarded=${calls.forwarded}, background=${calls.limiterInFlight}`,
  );
  return counted;
}
