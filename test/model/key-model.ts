// A model of the changes to a key's record, run against the real Worker (authentication, the
// isolate's key cache, the location holders' copies, the key's object) with D1 as the truth:
// fast-check generates requests with any of the key's secrets in two locations (or none), time
// moving (across the key cache's 25 s refresh and 30 s life), and admin changes: a roll with or
// without grace, the expiry moved earlier, later or cleared, the key disabled, enabled or
// revoked, each made in this isolate (which forgets its copy) or in another (this isolate keeps
// its copy, as a warm isolate elsewhere does). After each change the model reads the key from D1
// by each secret's hash: what each secret may do from then on. After every request it checks:
// - a secret D1 refuses is not served once the change that made it so has applied: at once for
//   a roll with no grace, a grace period's end, and an expiry that has passed (1.75 s,
//   ISOLATE_LEASE_MS, while the isolate may hold its own lease of the key), and within
//   CHANGE_APPLIES_WITHIN_MS (2 s) for a disabling or a revocation;
// - where the change's push to the location holders was lost before they acted (`keyChanged`),
//   a secret D1 refuses is served only on a copy of the key older than the change: within
//   HELD_KEY_MAX_AGE_MS (30 s, the age every copy is read again at) of it, and after that at
//   most one request per location (a holder holding standing permits decides one on its kept
//   copy, however old, and reads it again at once), and none once every standing permit granted
//   before the change has ended (docs/quotas.md, "How fresh a holder's copy is");
// - a secret D1 lets in is not refused (401) once it has been let in for CHANGE_APPLIES_WITHIN_MS
//   (an enabling, a cleared or later expiry, a new secret);
// - nothing answers a 5xx other than 503.
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { cachedKey, cacheKey, forgetKey } from "../../src/auth/key-cache";
import { findKeyByHash, type KeyMatch, secretStatus } from "../../src/db/keys";
import { MINUTE_MS } from "../../src/lib/clock";
import { sha256Hex } from "../../src/lib/crypto";
import { HELD_KEY_MAX_AGE_MS } from "../../src/objects/holder-key-record";
import { holderName } from "../../src/objects/quota-holder";
import { leaseWanted } from "../../src/quota/arrival-rate";
import { CHANGE_APPLIES_WITHIN_MS, ISOLATE_LEASE_MS } from "../../src/quota/lease";
import { STANDING_MOST_MINUTES } from "../../src/quota/standing";
import {
  ADMIN,
  auth,
  BASE,
  call,
  callWith,
  evictIfRunning,
  issueKey,
  patchKey,
  postJson,
} from "../helpers";

export const KEY_LOCATIONS = ["AMS", "FRA", null] as const;

export type KeyChangeKind =
  | "rollNoGrace"
  | "rollWithGrace"
  | "expireSoon"
  | "expireLater"
  | "clearExpiry"
  | "disable"
  | "enable"
  | "revoke";

/** What D1 said of each secret (by hash) right after a change was answered. */
interface Snapshot {
  kind: KeyChangeKind | "issued";
  /** When the admin API answered (fake time). */
  at: number;
  matches: Map<string, KeyMatch | null>;
  /** Its pushes to the location holders (`keyChanged`) were lost before the holders acted. */
  pushLost: boolean;
}

export interface KeyModel {
  id: string;
  /** Every secret the key had, oldest first. */
  secrets: { token: string; hash: string }[];
  snapshots: Snapshot[];
  /** When this isolate received each request (the lease it may hold follows from them). */
  arrivals: number[];
  revoked: boolean;
  /**
   * Requests served, with a secret D1 refuses, on a copy older than HELD_KEY_MAX_AGE_MS after a
   * lost push: by the change's snapshot and the location (at most one each).
   */
  servedOnOldCopy: Map<string, number>;
  violations: string[];
  log: string[];
}

export interface KeyReal {
  time: { now: number };
  passTime: () => Promise<void>;
  /** The background work of the objects' fake timers (test/background-work.ts). */
  work: KeyModelWork;
}

/** What the key model needs of the file's background work (test/background-work.ts). */
export interface KeyModelWork {
  passTime: () => Promise<void>;
  /** Drops every sleep (the objects that slept were evicted). */
  forgetSleeps: () => void;
  /** A stub evictDurableObject accepts. */
  uncounted: <T extends Rpc.DurableObjectBranded | undefined>(
    namespace: DurableObjectNamespace<T>,
    name: string,
  ) => DurableObjectStub<T>;
}

let seq = 0;

/** A fresh key, used once so that its object and first location holder exist. */
export function keyModelSetup(time: { now: number }, start: number, work: KeyModelWork) {
  const { passTime } = work;
  return async (): Promise<{ model: KeyModel; real: KeyReal }> => {
    time.now = start;
    const { id, key } = await issueKey("free");
    const hash = await sha256Hex(key);
    const model: KeyModel = {
      id,
      secrets: [{ token: key, hash }],
      snapshots: [],
      arrivals: [],
      revoked: false,
      servedOnOldCopy: new Map(),
      violations: [],
      log: [],
    };
    model.snapshots.push({
      kind: "issued",
      at: time.now,
      matches: await readSecrets(model),
      pushLost: false,
    });
    return { model, real: { time, passTime, work } };
  };
}

async function readSecrets(m: KeyModel): Promise<Map<string, KeyMatch | null>> {
  const matches = new Map<string, KeyMatch | null>();
  for (const { hash } of m.secrets) matches.set(hash, await findKeyByHash(env.DB, hash));
  return matches;
}

const usable = (match: KeyMatch | null | undefined, at: number) =>
  !!match && secretStatus(match, at) === "active";

/**
 * The change from which D1 has said the same of `hash` at `at` without a break (each snapshot
 * since, judged at `at`), and what it says; null if the key had no such secret then.
 */
function sameSince(m: KeyModel, hash: string, at: number) {
  const past = m.snapshots.filter((s) => s.at <= at);
  const last = past.at(-1)!;
  const lets = usable(last.matches.get(hash), at);
  let since = last;
  for (let i = past.length - 2; i >= 0; i--) {
    if (usable(past[i]!.matches.get(hash), at) !== lets) break;
    since = past[i]!;
  }
  return { lets, since };
}

/** Whether this isolate may hold a lease of its own of the key at `at` (it was busy since `from`). */
function mayHoldLease(m: KeyModel, from: number): boolean {
  return m.arrivals.some(
    (a, i) =>
      a >= from - ISOLATE_LEASE_MS &&
      leaseWanted(m.arrivals.slice(0, i + 1), a, ISOLATE_LEASE_MS) > 0,
  );
}

/** How long after a change a secret it refuses may still be served (see the file's comment). */
function refusalBound(m: KeyModel, change: Snapshot): number {
  if (change.kind === "disable" || change.kind === "revoke") return CHANGE_APPLIES_WITHIN_MS;
  return mayHoldLease(m, change.at) ? ISOLATE_LEASE_MS : 0;
}

/**
 * The last standing permit granted before a change ends by this long after it: a holder's copy
 * older than the change then decides nothing (`onceStale` needs standing permits held).
 */
const STANDING_HORIZON_MS = (STANDING_MOST_MINUTES + 1) * MINUTE_MS;

/**
 * Where `change`'s push was lost: a request with a secret D1 refuses since it, sent `at` in
 * `location`, served. Allowed on a copy of the key older than the change (within
 * HELD_KEY_MAX_AGE_MS of it), then once per location while standing permits granted before it
 * can be held: the violation, if any.
 */
function servedAfterLostPush(
  m: KeyModel,
  change: Snapshot,
  location: number,
  at: number,
): string | null {
  if (at < change.at + HELD_KEY_MAX_AGE_MS) return null;
  const where = KEY_LOCATIONS[location];
  if (!where) return "with no location (no holder), on a copy older than 30 s";
  if (at >= change.at + STANDING_HORIZON_MS)
    return `in ${where}, past the standing horizon (${STANDING_HORIZON_MS} ms) of the lost push`;
  const key = `${m.snapshots.indexOf(change)}@${where}`;
  const count = (m.servedOnOldCopy.get(key) ?? 0) + 1;
  m.servedOnOldCopy.set(key, count);
  return count > 1 ? `in ${where}: the ${count}th request on a copy older than 30 s` : null;
}

function violation(m: KeyModel, what: string): void {
  m.violations.push(`${what} [after: ${m.log.slice(-6).join("; ")}]`);
}

const iso = (ms: number) => new Date(ms).toISOString();

type Cmd = fc.AsyncCommand<KeyModel, KeyReal>;

abstract class KeyStep implements Cmd {
  /** Requests sent right after this step (null: none). */
  probe: KeyRequest | null = null;
  abstract label(): string;
  check(_m: Readonly<KeyModel>): boolean {
    return true;
  }
  abstract act(m: KeyModel, r: KeyReal): Promise<void>;
  async run(m: KeyModel, r: KeyReal): Promise<void> {
    m.log.push(this.toString());
    await this.act(m, r);
    if (this.probe && !m.violations.length) await this.probe.act(m, r);
    if (m.violations.length) throw new Error(`invariant broken:\n${m.violations.join("\n")}`);
  }
  toString(): string {
    return this.probe ? `${this.label()} then ${this.probe.label()}` : this.label();
  }

  /** This step, then requests in `location` (null: none). */
  withRequestsIn(location: number | null): this {
    this.probe = location === null ? null : new KeyRequest(location, 1);
    return this;
  }

  /** This step, then one request with the newest secret in `location`, from a cold isolate. */
  withSparseRequestIn(location: number): this {
    this.probe = new SparseKeyRequest(location);
    return this;
  }

  /** This step, then the key's objects evicted, then a sparse request (`withSparseRequestIn`). */
  withEvictionThenSparseRequestIn(location: number): this {
    this.probe = new SparseKeyRequestAfterEviction(location);
    return this;
  }
}

/**
 * `count` requests at once with each of the key's secrets that matter (the first, the newest and
 * the one before it), in `location`.
 */
class KeyRequest extends KeyStep {
  constructor(
    readonly location: number,
    readonly count: number,
  ) {
    super();
  }
  label() {
    return `Request(${KEY_LOCATIONS[this.location] ?? "no location"}, ×${this.count} per secret)`;
  }
  /** The secrets sent, `count` times each. */
  secretsSent(m: KeyModel): KeyModel["secrets"] {
    return [...new Set([m.secrets[0]!, m.secrets.at(-2), m.secrets.at(-1)!])].filter(
      (s) => s !== undefined,
    );
  }
  async act(m: KeyModel, r: KeyReal) {
    const colo = KEY_LOCATIONS[this.location];
    const at = r.time.now;
    const secrets = this.secretsSent(m);
    const answers = await Promise.all(
      secrets.flatMap(({ token, hash }) =>
        Array.from({ length: this.count }, () => {
          m.arrivals.push(at);
          const request = new Request(`${BASE}/v1/pets?limit=1`, {
            headers: auth(token, { "CF-Connecting-IP": `198.51.100.${(++seq % 250) + 1}` }),
            ...(colo ? { cf: { colo } } : {}),
          } as RequestInit);
          return callWith({}, request).then(async (res) => {
            await res.arrayBuffer();
            return { hash, status: res.status };
          });
        }),
      ),
    );
    await r.passTime();
    for (const { hash, status } of answers) {
      const { lets, since } = sameSince(m, hash, at);
      const which = `secret ${m.secrets.findIndex((s) => s.hash === hash)} sent at ${iso(at)}`;
      if (status >= 500 && status !== 503) violation(m, `${which}: answered ${status}`);
      if (!lets && status === 200) {
        const broken = since.pushLost
          ? servedAfterLostPush(m, since, this.location, at)
          : at >= since.at + refusalBound(m, since)
            ? "past the change's bound"
            : null;
        if (broken)
          violation(
            m,
            `${which}: served (200) ${broken}, but D1 refuses it since ${since.kind}${since.pushLost ? " (push lost)" : ""} answered at ${iso(since.at)}`,
          );
      }
      if (lets && status === 401 && at >= since.at + CHANGE_APPLIES_WITHIN_MS)
        violation(
          m,
          `${which}: refused (401), but D1 lets it in since ${since.kind} answered at ${iso(since.at)}`,
        );
    }
  }
}

/**
 * One request with the key's newest secret in `location`, from an isolate whose record of the
 * key is gone (as it is 30 s after it was read): a sparse key's request, authenticated by the
 * key's holder there from its copy, read ahead of it or not.
 */
class SparseKeyRequest extends KeyRequest {
  constructor(location: number) {
    super(location, 1);
  }
  override label() {
    return `SparseRequest(${KEY_LOCATIONS[this.location]}, newest secret, cold isolate)`;
  }
  override secretsSent(m: KeyModel): KeyModel["secrets"] {
    return [m.secrets.at(-1)!];
  }
  override async act(m: KeyModel, r: KeyReal) {
    forgetKey(m.id);
    await super.act(m, r);
  }
}

/** A sparse request (SparseKeyRequest) after the key's objects were evicted (KeyEvict). */
class SparseKeyRequestAfterEviction extends SparseKeyRequest {
  override label() {
    return `${new KeyEvict().label()}, then ${super.label()}`;
  }
  override async act(m: KeyModel, r: KeyReal) {
    await new KeyEvict().act(m, r);
    await super.act(m, r);
  }
}

/** Time moves on by `ms` (the background work due meanwhile runs). */
class KeyAdvance extends KeyStep {
  constructor(readonly ms: number) {
    super();
  }
  label() {
    return `Advance(${this.ms})`;
  }
  async act(_m: KeyModel, r: KeyReal) {
    r.time.now += this.ms;
    await r.passTime();
  }
}

/**
 * The key's Durable Objects are evicted from memory, its location holders and its object (as
 * when idle for a minute or two, or restarted): what each kept in storage comes back with a new
 * instance (a holder's standing permits and, with them, its copy of the key), and their work
 * waiting on timers goes with them (every sleep is dropped: no evicted instance wakes again).
 */
class KeyEvict extends KeyStep {
  label() {
    return "Evict(holders and the key's object)";
  }
  async act(m: KeyModel, r: KeyReal) {
    await r.passTime();
    for (const location of KEY_LOCATIONS)
      if (location)
        await evictIfRunning(r.work.uncounted(env.QUOTA_HOLDER, holderName(m.id, location)));
    await evictIfRunning(r.work.uncounted(env.QUOTA, m.id));
    r.work.forgetSleeps();
  }
}

/** This isolate's cached copy of the key goes (an eviction from its cache, a cold isolate). */
class KeyForget extends KeyStep {
  label() {
    return "Cold()";
  }
  async act(m: KeyModel) {
    forgetKey(m.id);
  }
}

class KeyChange extends KeyStep {
  constructor(
    readonly kind: KeyChangeKind,
    /** Made by another isolate: this one keeps the copy it has cached. */
    readonly elsewhere: boolean,
    /** A roll's grace, or how far ahead the expiry is moved (ms). */
    readonly ms: number,
    /** The key's object's pushes of it to the location holders are lost before they act. */
    readonly pushLost = false,
  ) {
    super();
  }
  label() {
    return `Change(${this.kind}${this.kind.startsWith("rollW") || this.kind.startsWith("expire") ? ` ${this.ms} ms` : ""}, ${this.elsewhere ? "elsewhere" : "here"}${this.pushLost ? ", push lost" : ""})`;
  }
  override check(m: Readonly<KeyModel>) {
    return !m.revoked;
  }
  async act(m: KeyModel, r: KeyReal) {
    const kept = m.secrets.map(({ hash }) => ({ hash, entry: cachedKey(hash, r.time.now) }));
    const cachedAt = r.time.now;
    const res = await (this.pushLost
      ? pushesLost(() => this.#make(m, r.time.now))
      : this.#make(m, r.time.now));
    if (res.status !== 200 && res.status !== 201) {
      violation(m, `${this.label()}: answered ${res.status} ${await res.text()}`);
      return;
    }
    if (this.kind.startsWith("roll")) {
      const token = ((await res.json()) as { key: string }).key;
      m.secrets.push({ token, hash: await sha256Hex(token) });
    } else await res.arrayBuffer();
    if (this.kind === "revoke") m.revoked = true;
    if (this.elsewhere)
      for (const { hash, entry } of kept) if (entry) cacheKey(hash, entry.match, cachedAt);
    m.snapshots.push({
      kind: this.kind,
      at: r.time.now,
      matches: await readSecrets(m),
      pushLost: this.pushLost,
    });
    await r.passTime();
  }
  #make(m: KeyModel, now: number): Promise<Response> {
    const roll = (gracePeriodSeconds: number) =>
      postJson(`/admin/v1/keys/${m.id}/roll`, { gracePeriodSeconds }, ADMIN);
    switch (this.kind) {
      case "rollNoGrace":
        return roll(0);
      case "rollWithGrace":
        return roll(Math.max(1, Math.round(this.ms / 1_000)));
      case "expireSoon":
      case "expireLater":
        return patchKey(m.id, {
          expiresAt: iso(now + (this.kind === "expireSoon" ? this.ms : 60_000 + this.ms)),
        });
      case "clearExpiry":
        return patchKey(m.id, { expiresAt: null });
      case "disable":
        return patchKey(m.id, { enabled: false });
      case "enable":
        return patchKey(m.id, { enabled: true });
      case "revoke":
        return call(`/admin/v1/keys/${m.id}`, { method: "DELETE", headers: ADMIN });
    }
  }
}

/**
 * Runs `work` (a change made through the admin API) with every `keyChanged` push to a location
 * holder lost before it reaches the holder: the key's object sees a dropped connection (which it
 * logs; it does not retry a push), and the holder, running or evicted, never hears of it.
 */
async function pushesLost<T>(work: () => Promise<T>): Promise<T> {
  const holders = env.QUOTA_HOLDER;
  const getByName = holders.getByName;
  const lossy = (name: string) => {
    const stub = getByName.call(holders, name);
    return new Proxy(stub, {
      get(target, prop) {
        if (prop !== "keyChanged") return Reflect.get(target, prop);
        return () =>
          Promise.reject(
            Object.assign(new Error(`network: connection lost (keyChanged to ${name})`), {
              retryable: true,
            }),
          );
      },
    });
  };
  Object.defineProperty(holders, "getByName", { value: lossy, configurable: true, writable: true });
  try {
    return await work();
  } finally {
    Object.defineProperty(holders, "getByName", {
      value: getByName,
      configurable: true,
      writable: true,
    });
  }
}

/** The commands of the key-record model. */
export { KeyAdvance, KeyChange, KeyEvict, KeyForget, KeyRequest };

export function keyCommands() {
  const kinds: KeyChangeKind[] = [
    "rollNoGrace",
    "rollWithGrace",
    "expireSoon",
    "expireLater",
    "clearExpiry",
    "disable",
    "enable",
  ];
  // Requests sent right after a change or a step in time, in one location (or none), or none.
  const probe = fc.option(fc.nat({ max: KEY_LOCATIONS.length - 1 }), { freq: 3 });
  const request = fc
    .tuple(fc.nat({ max: KEY_LOCATIONS.length - 1 }), fc.integer({ min: 1, max: 2 }))
    .map(([l, n]) => new KeyRequest(l, n));
  // A revocation ends what a run can explore: rare.
  const kind = fc.oneof(
    { weight: 20, arbitrary: fc.constantFrom(...kinds) },
    { weight: 1, arbitrary: fc.constant<KeyChangeKind>("revoke") },
  );
  // One change in four has its pushes to the location holders lost.
  const pushLost = fc.boolean().chain((lost) => (lost ? fc.boolean() : fc.constant(false)));
  const change = fc
    .tuple(kind, fc.boolean(), fc.integer({ min: 1_000, max: 4_000 }), pushLost, probe)
    .map(([k, e, ms, lost, p]) => new KeyChange(k, e, ms, lost).withRequestsIn(p));
  return [
    request,
    request,
    fc
      .tuple(fc.integer({ min: 1, max: 5_000 }), probe)
      .map(([ms, p]) => new KeyAdvance(ms).withRequestsIn(p)),
    fc
      .tuple(fc.integer({ min: 20_000, max: 31_000 }), probe)
      .map(([ms, p]) => new KeyAdvance(ms).withRequestsIn(p)),
    // A key calling every 10 s to every minute in a location: its holder reads its copy again
    // ahead of the next request (objects/quota-holder.ts), before or after a change.
    fc
      .tuple(fc.integer({ min: 10_000, max: 65_000 }), fc.nat({ max: 1 }))
      .map(([ms, l]) => new KeyAdvance(ms).withSparseRequestIn(l)),
    change,
    change,
    change,
    fc.constant(new KeyForget()),
    // A sparse key's objects evicted between its requests (it calls every minute or less often):
    // its holder answers the next one from what it kept.
    fc
      .tuple(fc.integer({ min: 30_000, max: 330_000 }), fc.nat({ max: 1 }))
      .map(([ms, l]) => new KeyAdvance(ms).withEvictionThenSparseRequestIn(l)),
  ];
}
