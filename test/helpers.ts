import {
  createExecutionContext,
  evictDurableObject,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, beforeEach, expect, onTestFinished, vi } from "vitest";
import { createApp } from "../src/app";
import { clock, DAY_MS, MINUTE_MS } from "../src/lib/clock";
import type { QuotaLimiter } from "../src/objects/quota-limiter";
import { QuotaLimiterClient } from "../src/objects/quota-limiter-client";
import { type LeaseCalls, LeaseHolder } from "../src/quota/lease-holder";
import type { Plan } from "../src/quota/plans";
import type { Policy } from "../src/quota/windows";

// ------------------------------------------------------------------ requests
export const ADMIN = { Authorization: `Bearer ${env.ADMIN_TOKEN}` };
export const BASE = "https://api.example.com";

export function call(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(`${BASE}${path}`, init);
}

export function auth(key: string, headers: Record<string, string> = {}): Record<string, string> {
  return { Authorization: `Bearer ${key}`, ...headers };
}

export function postJson(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return call(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/**
 * Sends a request straight into a fresh app whose bindings are the test env with `bindings` swapped
 * in (fault injection: a broken D1 or limiter; another CORS_ORIGINS…). `input` is a path under
 * BASE, an absolute URL (with `init`) or a ready Request. `wait: true` also waits for the
 * request's `waitUntil()` work before returning, with its sleeps in virtual time (see
 * `waitInVirtualTime`).
 */
export async function callWith(
  bindings: { [K in keyof Env]?: unknown },
  input: string | Request,
  init: RequestInit = {},
  { wait = false }: { wait?: boolean } = {},
): Promise<Response> {
  const request =
    typeof input === "string"
      ? new Request(input.startsWith("/") ? `${BASE}${input}` : input, init)
      : input;
  const ctx = createExecutionContext();
  if (!wait) return createApp().fetch(request, { ...env, ...bindings }, ctx);
  return waitInVirtualTime(ctx, () => createApp().fetch(request, { ...env, ...bindings }, ctx));
}

/** How long the request's other work must have been quiet before a virtual sleep ends, in ms. */
const QUIET_MS = 25;

/**
 * Runs `serve`, then waits for `ctx`'s `waitUntil()` work, with every `clock.sleep` it makes in
 * virtual time. The waits a request leaves behind (a lease's give-back 250 ms after its 5 s
 * expiry) would hold each test for seconds of real time: here a sleep ends, earliest first, as
 * soon as the request's other work has been quiet for QUIET_MS, and moves a real clock forward by
 * what was skipped (`skipClockTo`), so the test sees the time it would have waited. A mocked clock
 * is left where it is, as real waiting would leave it. A test that mocks `clock.sleep` itself
 * keeps its own.
 */
async function waitInVirtualTime(
  ctx: ExecutionContext,
  serve: () => Response | Promise<Response>,
): Promise<Response> {
  if (virtual.waiting === 0 && vi.isMockFunction(clock.sleep)) {
    const res = await serve();
    await waitOnExecutionContext(ctx);
    return res;
  }
  // Requests waited for at once (Promise.all of callWith) share one queue of sleeps.
  if (virtual.waiting++ === 0) {
    const spy = vi
      .spyOn(clock, "sleep")
      .mockImplementation(
        (ms) =>
          new Promise<void>((resolve) => virtual.sleeps.push({ until: clock.now() + ms, resolve })),
      );
    virtual.restore = () => spy.mockRestore();
  }
  try {
    const res = await serve();
    let done = false;
    const finished = waitOnExecutionContext(ctx).then(() => {
      done = true;
    });
    while (!done) {
      await Promise.race([finished, new Promise((r) => setTimeout(r, QUIET_MS))]);
      if (done || virtual.sleeps.length === 0) continue;
      virtual.sleeps.sort((x, y) => x.until - y.until);
      const next = virtual.sleeps.shift()!;
      skipClockTo(next.until);
      next.resolve();
    }
    return res;
  } finally {
    if (--virtual.waiting === 0) {
      virtual.restore?.();
      virtual.restore = null;
      // A sleep no waited-for request made (background work of an earlier request) never ends,
      // as it would not have within the test in real time either.
      virtual.sleeps = [];
    }
  }
}

/** The virtual sleeps of the requests callWith is waiting for, and how to end them. */
const virtual: {
  waiting: number;
  sleeps: { until: number; resolve: () => void }[];
  restore: (() => void) | null;
} = { waiting: 0, sleeps: [], restore: null };

/** Real time skipped by virtual sleeps in the current test (see skipClockTo). */
let skippedMs = 0;

/**
 * Makes a real (unmocked) service clock read at least `until` for the rest of the current test,
 * as if that much real time had passed. A mocked clock is the test's to move: left alone.
 */
function skipClockTo(until: number): void {
  if (skippedMs === 0 && vi.isMockFunction(clock.now)) return;
  const behind = until - (Date.now() + skippedMs);
  if (behind <= 0) return;
  if (skippedMs === 0) {
    const spy = vi.spyOn(clock, "now").mockImplementation(() => Date.now() + skippedMs);
    onTestFinished(() => {
      spy.mockRestore();
      skippedMs = 0;
    });
  }
  skippedMs += behind;
}

export async function expectError(
  res: Response,
  status: number,
  code: string,
): Promise<{ code: string; message: string; status: number }> {
  const body = (await res.json()) as { code: string; message: string; status: number };
  if (
    res.status !== status ||
    body.code !== code ||
    body.status !== status ||
    typeof body.message !== "string"
  ) {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${JSON.stringify(body)}`);
  }
  if (!res.headers.get("Content-Type")?.startsWith("application/json"))
    throw new Error("error without application/json");
  return body;
}

// ------------------------------------------------------------------ keys and pets
export interface IssuedKey {
  id: string;
  key: string;
  plan: Plan;
  limits: { perMinute: number; perDay: number };
}

/** Issues a key through the admin API, as an operator would. */
export async function issueKey(
  plan: Plan = "pro",
  limits?: { perMinute: number; perDay: number },
  extra: Record<string, unknown> = {},
): Promise<IssuedKey> {
  const res = await postJson(
    "/admin/v1/keys",
    { name: `test-${plan}`, plan, ...(limits ? { limits } : {}), ...extra },
    ADMIN,
  );
  if (res.status !== 201)
    throw new Error(`issuing a key failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as IssuedKey;
}

/** GET /admin/v1/keys/{id}: the key with its usage (the raw response). */
export function keyDetail(id: string): Promise<Response> {
  return call(`/admin/v1/keys/${id}`, { headers: ADMIN });
}

/** PATCH /admin/v1/keys/{id} with a JSON body (the raw response). */
export function patchKey(id: string, body: unknown): Promise<Response> {
  return call(`/admin/v1/keys/${id}`, {
    method: "PATCH",
    headers: { ...ADMIN, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

export async function createPets(
  key: string,
  pets: Array<{ name: string; categoryId: number; status?: string }>,
): Promise<Array<{ id: number }>> {
  const out = [];
  for (const pet of pets) {
    const res = await postJson("/v1/pets", pet, auth(key));
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
    out.push((await res.json()) as { id: number });
  }
  return out;
}

/** How many pets D1 holds (all keys' pets: storage is shared by the tests of a file). */
export async function petCount(): Promise<number> {
  return (await env.DB.prepare("SELECT COUNT(*) AS n FROM pets").first<{ n: number }>())!.n;
}

// ------------------------------------------------------------------ D1 outages
/** What a failing D1 says: SQL and internals that must never reach the client. */
export const D1_FAILURE =
  "D1_ERROR: Network connection lost while running SELECT key_hash FROM api_keys WHERE secret = 'x'";
const D1_FAILURE_LEAKS = [
  "SELECT",
  "api_keys",
  "key_hash",
  "D1_ERROR",
  "Network connection lost",
  "    at ",
];

/** How the binding fails: queries reject; prepare() throws synchronously; withSession() throws. */
export type D1FailureMode = "reject" | "prepare-throws" | "session-throws";

/**
 * env.DB, but queries matching `fails` (default: every query) fail in the given way, in the
 * sessions it opens too, with `message` (default: D1_FAILURE). In "reject" mode a batch fails
 * when it holds a failing statement; in the other modes every batch fails.
 */
export function brokenDb({
  fails = () => true,
  mode = "reject",
  message = D1_FAILURE,
}: {
  fails?: (sql: string) => boolean;
  mode?: D1FailureMode;
  message?: string;
} = {}): D1Database {
  const failure = () => new Error(message);
  const failing = new Set<unknown>();
  const rejectingStatement = () => {
    const reject = () => Promise.reject(failure());
    const stmt = { bind: () => stmt, first: reject, all: reject, run: reject, raw: reject };
    failing.add(stmt);
    return stmt as unknown as D1PreparedStatement;
  };
  const wrap = <T extends D1Database | D1DatabaseSession>(real: T) => ({
    prepare: (sql: string) => {
      if (!fails(sql)) return real.prepare(sql);
      if (mode === "prepare-throws") throw failure();
      return rejectingStatement();
    },
    batch: (stmts: D1PreparedStatement[]) =>
      mode === "reject" && !stmts.some((s) => failing.has(s))
        ? real.batch(stmts)
        : Promise.reject(failure()),
  });
  return {
    ...wrap(env.DB),
    withSession: (bookmark?: string) => {
      if (mode === "session-throws") throw failure();
      const session = env.DB.withSession(bookmark);
      return { ...wrap(session), getBookmark: () => session.getBookmark() };
    },
  } as unknown as D1Database;
}

/** A 503 service_unavailable Error body with Retry-After that leaks nothing of D1_FAILURE. */
export async function expect503(res: Response, what = "expected 503"): Promise<void> {
  const text = await res.text();
  expect(res.status, `${what}: ${text}`).toBe(503);
  expect(res.headers.get("Content-Type") ?? "", what).toMatch(/^application\/json/);
  expect(JSON.parse(text), what).toEqual({
    code: "service_unavailable",
    message: expect.any(String),
    status: 503,
  });
  expect(res.headers.get("Retry-After"), `${what}: Retry-After`).toMatch(/^[1-9][0-9]*$/);
  for (const leak of D1_FAILURE_LEAKS) expect(text, what).not.toContain(leak);
}

// ------------------------------------------------------------------ time
/** 2030-06-10T10:20:00Z: minute-aligned, in the future (so fake-time alarms never fire), before getPet's sunset. */
export const T0 = Date.UTC(2030, 5, 10, 10, 20, 0);
/** The UTC day of T0 starts at DAY0 and ends at MIDNIGHT. */
export const DAY0 = Date.UTC(2030, 5, 10);
export const MIDNIGHT = DAY0 + DAY_MS;
/** How long a key stays banned (BAN_MINUTES, default 15). */
export const BAN_MS = 15 * MINUTE_MS;

/** A key's policy with these limits, version 1 and not revoked (`extra` overrides any field). */
export const policyWith = (
  perMinute: number,
  perDay: number,
  extra: Partial<Policy> = {},
): Policy => ({ perMinute, perDay, version: 1, revoked: false, ...extra });

/**
 * The leases a key's object still waits for, oldest minute first: the minute each was granted in,
 * and its permits. `object` should be a stub the tests' call counting does not see (`uncounted`).
 */
export const leasesOutOf = (object: DurableObjectStub<QuotaLimiter>) =>
  runInDurableObject(object, (_instance, state) =>
    state.storage.sql
      .exec<{ minuteStart: number; permits: number }>(
        "SELECT minute_start AS minuteStart, permits FROM leases ORDER BY minute_start",
      )
      .toArray(),
  );

/**
 * Asks the key's object to decide requests of `policy` (from elsewhere: no holder) past its minute
 * limit until it bans the key, and fails the test if it never does.
 */
export async function banKeyAtItsObject(keyId: string, policy: Policy): Promise<void> {
  const object = env.QUOTA.getByName(keyId);
  const outcomes: string[] = [];
  for (let i = 0; i < 300 && outcomes.at(-1) !== "key_banned"; i++)
    outcomes.push((await object.admit(policy)).outcome);
  expect(outcomes.at(-1), "the key's object bans the key").toBe("key_banned");
}

/**
 * Mocks the service clock for every test of the calling file, from `start` (or what `start()`
 * says before each test); move it with `time.now = …` or `time.now += …`. The Durable Objects see
 * it too (same isolate).
 */
export function mockClock(start: number | (() => number)): { now: number } {
  const time = { now: 0 };
  beforeEach(() => {
    time.now = typeof start === "function" ? start() : start;
    vi.spyOn(clock, "now").mockImplementation(() => time.now);
  });
  afterEach(() => vi.restoreAllMocks());
  return time;
}

/** Mocks the service clock from `at` for the rest of the current test only; move it like mockClock's. */
export function fixClock(at: number): { now: number } {
  const time = { now: at };
  const spy = vi.spyOn(clock, "now").mockImplementation(() => time.now);
  onTestFinished(() => spy.mockRestore());
  return time;
}

/** A decision's retryAt (refusals have one; admissions and revocations do not). */
export const retryAtOf = (decision: object): number | undefined =>
  "retryAt" in decision ? (decision.retryAt as number) : undefined;

/** The D1 binding, recording the SQL of every statement it prepares that `matches`. */
export function preparingDb(matches: (sql: string) => boolean = () => true) {
  const prepared: string[] = [];
  const db = new Proxy(env.DB, {
    get: (target, prop) =>
      prop === "prepare"
        ? (sql: string) => {
            if (matches(sql)) prepared.push(sql);
            return target.prepare(sql);
          }
        : Reflect.get(target, prop).bind(target),
  });
  return { db, prepared };
}

/** When a Durable Object will next run its alarm (null: none set). */
export const alarmOf = (stub: DurableObjectStub) =>
  runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());

/** Records the bookmark each D1 session of a request started from. */
export function recordingDb() {
  const opened: string[] = [];
  const db = new Proxy(env.DB, {
    get: (target, prop) =>
      prop === "withSession"
        ? (b: string) => (opened.push(b), target.withSession(b))
        : Reflect.get(target, prop).bind(target),
  });
  return { db, opened };
}

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32), so a failure can be replayed. */
export function seededRandom(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Admits requests of `policy` through `holder`, `stepMs` apart on the mocked clock `time`, until
 * one of them sends a renewal, and fails the test if none does within `most` requests. Returns
 * that renewal and how many requests were admitted on the way.
 */
export async function admitUntilRenewal(
  holder: LeaseHolder,
  policy: Policy,
  calls: LeaseCalls,
  time: { now: number },
  { stepMs, most }: { stepMs: number; most: number },
): Promise<{ renewal: Promise<boolean>; admitted: number }> {
  let admitted = 0;
  for (let i = 0; i < most; i++) {
    time.now += stepMs;
    const decided = await holder.admit(policy, calls);
    if (decided.decision.outcome === "allowed") admitted++;
    if (decided.renewal) return { renewal: decided.renewal, admitted };
  }
  expect.fail(`no renewal within ${most} requests ${stepMs} ms apart`);
}

/**
 * One simulated isolate in `location`: its own lease holder and a limiter client for `keyId` that
 * goes through that location's holder object, as a Worker isolate there does.
 */
export function isolateClientIn(
  keyId: string,
  location: string,
): { leases: LeaseHolder; client: QuotaLimiterClient } {
  const leases = new LeaseHolder();
  const client = new QuotaLimiterClient(
    env.QUOTA,
    { id: keyId, region: null },
    { holders: env.QUOTA_HOLDER, name: location },
    leases,
  );
  return { leases, client };
}

/** A promise that stays pending until the test calls `open()`: holds an answer back on its way. */
export function closedGate(): { gate: Promise<void>; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { gate, open };
}

/**
 * env.DB, except that each single-row read (`prepare(sql).bind(...).first()`) goes through
 * `read`, given the read itself: a test delays a read's start or its answer (a slow D1).
 */
export function dbWithReads(read: (first: () => Promise<unknown>) => Promise<unknown>): D1Database {
  return new Proxy(env.DB, {
    get: (target, prop) =>
      prop === "prepare"
        ? (sql: string) => {
            const statement = target.prepare(sql);
            return new Proxy(statement, {
              get: (s, p) =>
                p === "bind"
                  ? (...args: unknown[]) => {
                      const bound = s.bind(...args);
                      return { first: () => read(() => bound.first()) };
                    }
                  : Reflect.get(s, p).bind(s),
            });
          }
        : Reflect.get(target, prop).bind(target),
  });
}

/**
 * Evicts an object from memory, as the runtime does with an idle one; false when it was not
 * running (nothing to evict: never called, or already gone).
 */
export async function evictIfRunning(stub: DurableObjectStub): Promise<boolean> {
  try {
    await evictDurableObject(stub);
    return true;
  } catch (err) {
    if (String(err).includes("not currently running")) return false;
    throw err;
  }
}
