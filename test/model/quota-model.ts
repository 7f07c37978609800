// A model of the quota protocol, run against the real tiers in workerd: the key's QuotaLimiter,
// one QuotaHolder per location, and simulated isolates (each its own LeaseHolder and client, as
// the Worker runs them). fast-check generates a list of commands (requests, time, faults on the
// network between the tiers, evictions, changes to the key); the model keeps what was served and
// what was changed, and after every command checks the invariants of docs/quotas.md against the
// real objects' answers. A failure shrinks to a short command list, replayable from its seed and
// path (npm run test:model -- --seed S --path P).

import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { AsyncLocalStorage } from "node:async_hooks";
import fc from "fast-check";
import { vi } from "vitest";
import { KEY_CACHE_TTL_MS } from "../../src/auth/key-cache";
import { clock, DAY_MS, dayName, MINUTE_MS } from "../../src/lib/clock";
import { STRANDED_AFTER_MS } from "../../src/objects/lease-ledger";
import { holderName, QuotaHolder } from "../../src/objects/quota-holder";
import type { AdmitResult } from "../../src/objects/quota-holder-client";
import { QuotaLimiter } from "../../src/objects/quota-limiter";
import { QuotaLimiterClient } from "../../src/objects/quota-limiter-client";
import { StandingLedger } from "../../src/objects/standing-ledger";
import { bindingWindow } from "../../src/quota/headers";
import { HeldLeases } from "../../src/quota/held-lease";
import {
  BACKGROUND_ENDS_WITHIN_MS,
  GIVE_BACK_GRACE_MS,
  heldBound,
  ISOLATE_LEASE_MS,
} from "../../src/quota/lease";
import { type LeaseCalls, LeaseHolder } from "../../src/quota/lease-holder";
import type { HeldLease, HolderDecision } from "../../src/quota/lease-in-hand";
import {
  ADMISSION_CLOCK_TOLERANCE_MS,
  ADMISSION_ID_LIFETIME_MS,
  admissionIdLive,
  type LeaseRequest,
  type LeaseReturn,
  newAdmissionId,
  type RenewalRequest,
  type ReturnedLease,
} from "../../src/quota/lease-messages";
import {
  STANDING_BACKGROUND_ENDS_WITHIN_MS,
  STANDING_MINUTES,
  STANDING_MOST_MINUTES,
} from "../../src/quota/standing";
import { StandingStock } from "../../src/quota/standing-stock";
import type { KeyDecision, Policy } from "../../src/quota/windows";
import { alarmOf } from "../helpers";
import { ADMISSIONS_COUNTED_ONCE, REMAINING_EXACT, WINDOWS_ONLY_MOVE_FORWARD } from "./flags";
import { type Caller, type CallMade, type Fault, Network, type Tier } from "./network";
import {
  admitAsPrevious,
  type Deployed,
  openAndDecideAsPrevious,
  PREVIOUS_QUIET_STOCK,
  type PreviousAdmission,
  type PreviousRenewal,
  type PreviousRenewalRequest,
  type PreviousReturnedLease,
  previousMinuteStockWanted,
  previousStandingWanted,
  renewAsPrevious,
  takeBackAsPrevious,
} from "./previous-release";

export const LOCATIONS = ["AMS", "FRA", "SIN"] as const;
/** Where the previous release's location holder runs (`PreviousReleaseStanding`). */
const PREVIOUS_LOCATION = "LHR";
export const ISOLATES_PER_LOCATION = 2;
const ISOLATES = LOCATIONS.length * ISOLATES_PER_LOCATION;

/**
 * The plans the key moves between, smallest first: a free key's limits (the key starts on it
 * unless a run picks another), a smaller and larger ones, and one whose day binds a sparse key
 * while it is still far from both limits (so `X-RateLimit-Remaining` shows the day while the key
 * holds standing permits, which its day counted at their grant).
 */
export const PLANS = [
  { perMinute: 12, perDay: 40 },
  { perMinute: 60, perDay: 100 },
  { perMinute: 60, perDay: 200 },
  { perMinute: 120, perDay: 400 },
];
export const FREE_PLAN = 2;

// ------------------------------------------------------------------ clocks
/** Whose clock a piece of code reads: the key's object's is the reference; others may be skewed. */
const clockOf = new AsyncLocalStorage<{ skewMs: number; self?: Caller; location?: string }>();

/** An isolate's lease holder that remembers which of its decisions it made from its own lease. */
class ObservedLeaseHolder extends LeaseHolder {
  readonly fromLease = new WeakSet<object>();
  override async admit(policy: Policy, calls: LeaseCalls): Promise<HolderDecision> {
    const decided = await super.admit(policy, calls);
    if (decided.local) this.fromLease.add(decided.decision);
    return decided;
  }
}

interface Isolate {
  index: number;
  location: string;
  leases: ObservedLeaseHolder;
  client: QuotaLimiterClient;
  /** The key's policy as this isolate cached it. */
  policy: Policy;
  /** When (true time) it read that copy: one KEY_CACHE_TTL_MS old is read again. */
  policyReadAt: number;
  skewMs: number;
}

/** A change pushed to the key's object. */
interface Change {
  policy: Policy;
  /** When the admin API's push was answered (true time), null while in flight. */
  answeredAt: number | null;
  /** The model's event count then (orders it before or after a request sent at the same instant). */
  answeredSeq: number;
  /**
   * A push to a location holder was faulted (lost or held): holders may go on admitting from the
   * stock they held, until it is used up or its lease ends (a stock for the minute: the minute's
   * end), and from standing permits of the minutes to come, for requests on a copy of the key
   * older than the change (at most KEY_CACHE_TTL_MS old); never past either.
   */
  pushFaulted: boolean;
  /** The latest the key's object's clock read when the push was answered. */
  objectClockAtAnswer: number;
  /**
   * Requests sent after the push was answered and admitted by a holder under an older policy, by
   * the minute they were admitted in.
   */
  admittedAfter: Tally;
}

/** Counts per window start. */
class Tally {
  readonly counts = new Map<number, number>();
  add(start: number, n = 1): number {
    const total = this.of(start) + n;
    this.counts.set(start, total);
    return total;
  }
  of(start: number): number {
    return this.counts.get(start) ?? 0;
  }
}

/** What the model knows: what was served, what changed, and when. */
export interface QuotaModel {
  /** Real time, in ms: never goes back, whatever the clocks read. */
  trueNow: number;
  /** The key's object's clock reads trueNow + this (negative after a step back). */
  objectSkewMs: number;
  /** The latest clock reading any tier made. */
  latestClock: number;
  /** The latest minute window any decision was made in (windows only move forward). */
  latestMinute: number;
  policy: Policy;
  /** Every policy the key had, and from when (true time). */
  policies: { policy: Policy; from: number }[];
  changes: Change[];
  servedInMinute: Tally;
  /** Permits lost unused with an evicted holder's memory, by their grant's minute and day. */
  strandedUnused: { inMinute: Tally; inDay: Tally };
  servedInDay: Tally;
  /** Requests whose decision never came back (the Worker fails open for them). */
  unreached: number;
  /** When each of those requests' admission ids was made (by its isolate's clock). */
  unreachedIdsMadeAt: number[];
  /** Permits counted twice by calls that reached the object twice (a duplicate, or lost after it acted and retried). */
  deliveredTwice: number;
  /**
   * Leases whose report of the requests served from them may never reach the key's object (those
   * requests are then billed as stranded, not admitted), by lease id: the most requests a report
   * that may be lost named (`used` counts all served from the lease so far), and the day they are
   * billed in (`billingDayOfLease`). Noted as an evicted location holder loses the leases it held
   * in memory only (its standing permits are kept in storage, reports and all), as a call held
   * past the settling deadline arrives (`reportsCarriedBy`), at the run's end for each hand-back
   * lost on its way and on its retry, and as an isolate or holder of the previous release loses
   * its hand-back or never makes it.
   */
  reportsMayBeLost: Map<string, { dayStart: number; used: number }>;
  /** Isolates that sent a request in each minute window (for the exactness of Remaining). */
  isolatesInMinute: Map<number, Set<number>>;
  /** Locations that sent a request in each minute window (standing permits outlive a minute). */
  locationsInMinute: Map<number, Set<string>>;
  /** Anything but requests, time and evictions that lose no permit happened (Remaining is then only bounded, not exact). */
  disturbed: boolean;
  /** Requests sent and not answered yet. */
  inFlight: number;
  /** Which release decides requests at the key's object (a rollback, then a roll forward). */
  release: Deployed;
  /** Counts events (requests sent, changes answered), to order those at the same instant. */
  seq: number;
  violations: string[];
  log: string[];
}

export interface QuotaReal {
  keyId: string;
  net: Network;
  isolates: Isolate[];
  pending: Set<Promise<void>>;
  /**
   * The location holders evicted in this run, whose alarms the model runs when due (the hand-back
   * of the standing permits they kept in storage); the alarms being run.
   */
  alarms: { of: Set<string>; running: Set<string> };
}

// ------------------------------------------------------------------ setup
let runs = 0;

/** Installs the network and clocks (call in each test, after the clock mock). */
export function installModelWorld(time: { now: number }): Network {
  const net = new Network(() => time.now);
  net.install();
  vi.spyOn(clock, "now").mockImplementation(() => time.now + (clockOf.getStore()?.skewMs ?? 0));
  return net;
}

/** Holder skews by location (the key's object's clock is the reference, skew 0). */
const holderSkews = new Map<string, number>();

/**
 * The round trip between each location (its holder and isolates) and the key's object, in fake
 * time (none set: 0, at once); a call within a location takes none. Set by `Latency`.
 */
const roundTrips = new Map<string, number>();
const locationOf = (holder: string) => holder.slice(holder.lastIndexOf("@") + 1);

/**
 * The one-way time of a call (Network.latencyOf): half the round trip of the location it goes
 * between and the key's object (an isolate's or a holder's call to the object, the object's push
 * to a holder); 0 within a location.
 */
function oneWayMs(tier: Tier, name: string, caller: Caller | null): number {
  let location: string | undefined;
  if (tier === "object")
    location =
      caller === null
        ? clockOf.getStore()?.location
        : caller.tier === "holder"
          ? locationOf(caller.name)
          : undefined;
  else if (caller?.tier === "object") location = locationOf(name);
  // Whole ms, as every clock reads (the objects store times as SQLite integers).
  return location === undefined ? 0 : Math.round((roundTrips.get(location) ?? 0) / 2);
}

/** The longest round trip now set. */
const longestRoundTrip = () => Math.max(0, ...roundTrips.values());

/** Makes every method of the objects run on its own clock (the holder's skew, or the object's 0). */
const nameOf = (self: object) => (self as { ctx: DurableObjectState }).ctx.id.name ?? "";

/** What a location holder's LeaseHolder holds in memory (its protected state, read by the model). */
interface HolderLeasesInMemory {
  lease: HeldLease | null;
  unreturned: ReturnedLease[];
  standing: { held(): { id: string }[] };
}

/** Each running location holder's LeaseHolder, by holder name: noted as it admits, gone with an eviction. */
const holderLeases = new Map<string, HolderLeasesInMemory>();
/** The ids of the standing permits granted so far (StandingStock.add). */
const standingIds = new Set<string>();

/**
 * The day in which the requests served from each lease (or standing permit) are billed, by id:
 * the day of its grant by the key's object's windows (the lease row's day, lease-ledger.ts, in
 * which its settling counts them admitted or stranded). Noted as this release's object grants it
 * (StandingLedger.lend), and as the previous release's grants are answered (`noteGrantedIn`).
 */
const billingDayOfLease = new Map<string, number>();
/** The minute each lease (or standing permit) this release's key's object granted was counted in. */
const grantMinuteOfLease = new Map<string, number>();

/** Notes the day the grants `ids` were made in, unless this release's object noted it already. */
function noteGrantedIn(ids: readonly string[], dayStart: number): void {
  for (const id of ids) if (!billingDayOfLease.has(id)) billingDayOfLease.set(id, dayStart);
}

function billingDayOfLeaseOrThrow(id: string): number {
  const dayStart = billingDayOfLease.get(id);
  if (dayStart === undefined) throw new Error(`model: no grant of lease ${id} was seen`);
  return dayStart;
}

/** Notes the day of every lease and standing permit this release's key's object grants. */
function watchGrants(): void {
  const lend = StandingLedger.prototype.lend;
  vi.spyOn(StandingLedger.prototype, "lend").mockImplementation(function (
    this: StandingLedger,
    ...args: Parameters<StandingLedger["lend"]>
  ) {
    const lent = lend.apply(this, args);
    const ids = [lent.lease, ...(lent.standing ?? [])].flatMap((g) => (g ? [g.id] : []));
    for (const id of ids) {
      billingDayOfLease.set(id, lent.state.dayStart);
      grantMinuteOfLease.set(id, lent.state.minuteStart);
    }
    return lent;
  });
}

/** What a report names of a lease: its id, and the requests served from it so far. */
type LeaseReport = { id: string; used?: number };

/**
 * The reports location holder `name` holds in memory only (its lease in use and those waiting to
 * go back, reported or not: its eviction may lose them), not the reports of standing permits
 * waiting to go back: those are kept in its storage until a call carrying them is answered.
 */
function reportsInMemoryOf(name: string): LeaseReport[] {
  const held = holderLeases.get(name);
  if (!held) return [];
  const retired = held.unreturned.filter((r) => !standingIds.has(r.id));
  return [...(held.lease ? [held.lease] : []), ...retired].map(({ id, used }) => ({ id, used }));
}

/**
 * The reports a call to the key's object carries: a hand-back's, a renewal's (the lease in use,
 * and those it hands back) and the leases a request hands back. None for any other call.
 */
function reportsCarriedBy({ tier, method, args }: CallMade): LeaseReport[] {
  if (tier !== "object") return [];
  switch (method) {
    case "returnLease":
      return [args[0] as ReturnedLease];
    case "returnLeases":
      return (args[0] as LeaseReturn).returning;
    case "renewLease": {
      const renewal = args[1] as RenewalRequest;
      return [{ id: renewal.leaseId, used: renewal.used ?? 0 }, ...renewal.returning];
    }
    case "admit":
      return (args[1] as LeaseRequest | undefined)?.returning ?? [];
    default:
      return [];
  }
}

/**
 * Notes that `reports` may never reach the key's object: what each names as served from its
 * lease may be billed as stranded, in the day of the lease's grant.
 */
function noteReportsMayBeLost(m: QuotaModel, reports: readonly LeaseReport[]): void {
  for (const { id, used = 0 } of reports) {
    if (used <= 0) continue;
    const most = Math.max(used, m.reportsMayBeLost.get(id)?.used ?? 0);
    m.reportsMayBeLost.set(id, { dayStart: billingDayOfLeaseOrThrow(id), used: most });
  }
}

/** The requests billed in day `dayStart` whose reports may be lost (`reportsMayBeLost`). */
function servedWithReportsLostIn(m: QuotaModel, dayStart: number): number {
  let served = 0;
  for (const lease of m.reportsMayBeLost.values())
    if (lease.dayStart === dayStart) served += lease.used;
  return served;
}

/**
 * The permits location holder `name` holds unused in memory only, by lease (lost with an
 * eviction: they stay counted in the minute and the day of their grant, settled as stranded).
 */
function unusedInMemoryOf(name: string): { id: string; unused: number }[] {
  const held = holderLeases.get(name);
  if (!held) return [];
  // Kept in its storage with the standing permits (a stock put aside to go back with them): not lost.
  const keptIds = new Set(held.standing.held().map((h) => h.id));
  const retired = held.unreturned.filter((r) => !standingIds.has(r.id) && !keptIds.has(r.id));
  return [
    ...(held.lease ? [{ id: held.lease.id, unused: held.lease.left }] : []),
    ...retired.map(({ id, unused }) => ({ id, unused })),
  ].filter((l) => l.unused > 0);
}

/**
 * How many decisions location holders made from a lease or standing permit they held, with no
 * call, by `decidedHereKey`; each taken off as its answer reaches the isolate (onAnswer).
 */
const decidedByHolders = new Map<string, number>();
const decidedHereKey = (location: string, d: KeyDecision) =>
  `${location} ${d.now} ${d.windows.find((w) => w.name === "minute")?.resetAt}`;

/**
 * Notes each location holder's LeaseHolder as it admits, what it decides from what it holds,
 * and every standing permit granted.
 */
function watchHolderLeases(): void {
  holderLeases.clear();
  decidedByHolders.clear();
  const admit = LeaseHolder.prototype.admit;
  vi.spyOn(LeaseHolder.prototype, "admit").mockImplementation(async function (
    this: LeaseHolder,
    ...args: Parameters<LeaseHolder["admit"]>
  ) {
    const decided = await admit.apply(this, args);
    const self = clockOf.getStore()?.self;
    if (decided.local && self?.tier === "holder") {
      const key = decidedHereKey(locationOf(self.name), decided.decision);
      decidedByHolders.set(key, (decidedByHolders.get(key) ?? 0) + 1);
    }
    return decided;
  });
  type Admits = { admitFromLease(...args: unknown[]): unknown };
  const proto = HeldLeases.prototype as unknown as Admits;
  const admitFromLease = proto.admitFromLease;
  vi.spyOn(proto, "admitFromLease").mockImplementation(function (this: Admits, ...args) {
    const self = clockOf.getStore()?.self;
    if (self?.tier === "holder" && !(this instanceof ObservedLeaseHolder))
      holderLeases.set(self.name, this as unknown as HolderLeasesInMemory);
    return admitFromLease.apply(this, args);
  });
  const add = StandingStock.prototype.add;
  vi.spyOn(StandingStock.prototype, "add").mockImplementation(function (
    this: StandingStock,
    ...args: Parameters<StandingStock["add"]>
  ) {
    for (const s of args[0] ?? []) standingIds.add(s.id);
    return add.apply(this, args);
  });
}

export function installObjectClocks(net: Network): void {
  holderSkews.clear();
  watchHolderLeases();
  watchGrants();
  const wrap = <T extends object>(proto: T, skewOf: (self: T) => number, tier: Tier) => {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === "constructor") continue;
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (!d || typeof d.value !== "function") continue;
      vi.spyOn(proto as Record<string, (...a: unknown[]) => unknown>, name).mockImplementation(
        function (this: T, ...args: unknown[]) {
          const self = { tier, name: nameOf(this) };
          return clockOf.run({ skewMs: skewOf(this), self }, () => d.value.apply(this, args));
        },
      );
    }
  };
  wrap(QuotaHolder.prototype, (self) => holderSkews.get(locationOf(nameOf(self))) ?? 0, "holder");
  wrap(QuotaLimiter.prototype, () => 0, "object");
  net.callerIs(() => clockOf.getStore()?.self ?? null);
}

export function modelSetup(net: Network, time: { now: number }, start: number) {
  /** `plan`: the index in PLANS of the key's plan at the start. */
  return (plan = FREE_PLAN): { model: QuotaModel; real: QuotaReal } => {
    const keyId = `model_${++runs}_${Math.floor(Math.random() * 1e9)}`;
    time.now = start;
    net.reset();
    holderSkews.clear();
    decidedByHolders.clear();
    roundTrips.clear();
    net.latencyOf = oneWayMs;
    const policy: Policy = { ...PLANS[plan % PLANS.length]!, version: 1, revoked: false };
    const isolates: Isolate[] = [];
    for (const location of LOCATIONS)
      for (let i = 0; i < ISOLATES_PER_LOCATION; i++) {
        const leases = new ObservedLeaseHolder();
        const client = new QuotaLimiterClient(
          env.QUOTA,
          { id: keyId, region: null },
          { holders: env.QUOTA_HOLDER, name: location },
          leases,
        );
        isolates.push({
          index: isolates.length,
          location,
          leases,
          client,
          policy,
          policyReadAt: start,
          skewMs: 0,
        });
      }
    net.onRelease = (held) => {
      // A call held past the settling deadline may find its leases settled as stranded: what its
      // reports name as served may be billed as stranded.
      if (held.part === "call" && time.now - held.heldAt >= STRANDED_AFTER_MS)
        noteReportsMayBeLost(model, reportsCarriedBy(held.call));
    };
    const model: QuotaModel = {
      trueNow: start,
      objectSkewMs: 0,
      latestClock: start,
      latestMinute: 0,
      policy,
      policies: [{ policy, from: start }],
      changes: [],
      servedInMinute: new Tally(),
      strandedUnused: { inMinute: new Tally(), inDay: new Tally() },
      servedInDay: new Tally(),
      unreached: 0,
      unreachedIdsMadeAt: [],
      deliveredTwice: 0,
      reportsMayBeLost: new Map(),
      isolatesInMinute: new Map(),
      locationsInMinute: new Map(),
      disturbed: false,
      inFlight: 0,
      release: "current",
      seq: 0,
      violations: [],
      log: [],
    };
    const alarms = { of: new Set<string>(), running: new Set<string>() };
    return { model, real: { keyId, net, isolates, pending: new Set(), alarms } };
  };
}

// ------------------------------------------------------------------ invariants
const minuteOf = (ms: number) => ms - (ms % MINUTE_MS);
const dayOf = (ms: number) => ms - (ms % DAY_MS);

/**
 * How long after a location's last request its holder may still hold standing permits (the last
 * of them ends then; their hand-back follows 250 ms on).
 */
const STANDING_HELD_FOR_MS = STANDING_BACKGROUND_ENDS_WITHIN_MS;

/**
 * Where a change's push to a location holder is lost, it applies within this long: every request
 * carries a copy of the key at most this old, and standing permits and stocks admit only
 * requests on the version they were granted under (docs/quotas.md, "Standing permits").
 */
const LOST_PUSH_APPLIES_WITHIN_MS = KEY_CACHE_TTL_MS;

/** The highest limits of any policy the key had during [start, end). */
function limitsDuring(m: QuotaModel, start: number, end: number) {
  let perMinute = 0;
  let perDay = 0;
  let bound = 0;
  m.policies.forEach(({ policy, from }, i) => {
    const until = m.policies[i + 1]?.from ?? Number.POSITIVE_INFINITY;
    // Policies are placed on true time; a window is on the clocks: compare loosely (the clocks
    // are within a few seconds of true time).
    if (from - 10_000 >= end || until + 10_000 <= start) return;
    perMinute = Math.max(perMinute, policy.perMinute);
    perDay = Math.max(perDay, policy.perDay);
    bound = Math.max(bound, heldBound(policy));
  });
  return { perMinute, perDay, bound };
}

/**
 * The most permits counted and not served a minute may hold: the largest heldBound of the
 * policies in force while its permits could be granted, from STANDING_MOST_MINUTES minutes before
 * it (standing permits are granted for the minutes to come, each within heldBound of the policy in
 * force at its grant, and a change lowers no grant already made) to its end.
 */
function heldBoundOfMinute(m: QuotaModel, minuteStart: number): number {
  const from = minuteStart - STANDING_MOST_MINUTES * MINUTE_MS;
  return limitsDuring(m, from, minuteStart + MINUTE_MS).bound;
}

function violation(m: QuotaModel, what: string): void {
  m.violations.push(`${what} [after: ${m.log.slice(-6).join("; ")}]`);
}

/** What a request knew when it was sent. */
interface Sent {
  iso: Isolate;
  at: number;
  clockAt: number;
  /** The model's event count when it was sent. */
  seq: number;
  /**
   * A minute it can no longer be decided in: the one before the latest minute any decision was
   * made in, and the one before the key's object's clock (a holder behind the object's clock
   * must not decide in it).
   */
  over: number;
  /** The one before the key's object's clock only (see onAnswer). */
  overByTheClock: number;
  /** Requests in flight anywhere when it was sent. */
  concurrent: number;
  /** Isolates holding permits of their own when it was sent. */
  leasesHeld: number;
}

const windowStarts = (d: { windows: { name: string; resetAt: number }[] }) => ({
  minuteStart: d.windows.find((w) => w.name === "minute")!.resetAt - MINUTE_MS,
  dayStart: d.windows.find((w) => w.name === "day")!.resetAt - DAY_MS,
});

/** Notes a request served on decision `d`: no window admits past its limit. */
function served(m: QuotaModel, d: KeyDecision, at: string): void {
  const { minuteStart, dayStart } = windowStarts(d);
  const inMinute = m.servedInMinute.add(minuteStart);
  const inDay = m.servedInDay.add(dayStart);
  const minuteLimits = limitsDuring(m, minuteStart, minuteStart + MINUTE_MS);
  const dayLimits = limitsDuring(m, dayStart, dayStart + DAY_MS);
  if (inMinute > minuteLimits.perMinute)
    violation(
      m,
      `${at}: minute ${new Date(minuteStart).toISOString()} admitted ${inMinute} > ${minuteLimits.perMinute}`,
    );
  if (inDay > dayLimits.perDay)
    violation(m, `${at}: day ${dayName(dayStart)} admitted ${inDay} > ${dayLimits.perDay}`);
}

function onAnswer(m: QuotaModel, sent: Sent, result: AdmitResult): void {
  m.inFlight--;
  const { iso } = sent;
  if (!result.reached) {
    m.unreached++;
    m.unreachedIdsMadeAt.push(sent.clockAt);
    return;
  }
  result.afterResponse?.catch(() => undefined);
  const d = result.decision;
  // Not decided because its admission id outlived ADMISSION_ID_LIFETIME_MS on its way (a call
  // held): an earlier attempt may have been decided and counted, its answer lost. For the bill,
  // a request whose decision never came back.
  if (d.outcome === "stale" && !admissionIdLive(newAdmissionId(sent.clockAt), d.now)) {
    m.unreached++;
    m.unreachedIdsMadeAt.push(sent.clockAt);
  }
  const minute = d.windows.find((w) => w.name === "minute")!;
  // Windows only move forward: no decision in a minute over when the request was sent. The key's
  // object never decides in a minute before the latest its windows reached. An isolate or a
  // location holder decides from a lease or standing permit of a minute, counted in it, until
  // that minute ends by its clock, measured from the object's answer: after the clocks step back
  // (StepBack steps every tier's), the minute before the one the object moved into is open
  // again to what was counted in it, for as long as the step. No limit is passed that way.
  const key = decidedHereKey(iso.location, d);
  const byHolder = decidedByHolders.get(key) ?? 0;
  if (byHolder > 0) decidedByHolders.set(key, byHolder - 1);
  const decidedHere = iso.leases.fromLease.has(d) || byHolder > 0;
  const over = decidedHere ? sent.overByTheClock : sent.over;
  if (WINDOWS_ONLY_MOVE_FORWARD && minute.resetAt - MINUTE_MS <= over)
    violation(
      m,
      `request of isolate ${iso.index} sent at ${new Date(sent.clockAt).toISOString()}: decided in minute ${new Date(minute.resetAt - MINUTE_MS).toISOString()}, already over`,
    );
  m.latestMinute = Math.max(m.latestMinute, minute.resetAt - MINUTE_MS);
  if (d.outcome !== "allowed") return;
  const { minuteStart, dayStart } = windowStarts(d);
  const at = `request of isolate ${iso.index} (${iso.location}) sent at ${new Date(sent.clockAt).toISOString()}`;
  served(m, d, at);

  // No request sent after a change's bound is admitted under the old policy: from an isolate's
  // own lease, ISOLATE_LEASE_MS; from a holder's stock the push reached, none at all; where the
  // push was lost or held, only from the stock that holder had (at most heldBound of the old
  // policy, all locations together), and only in the minute it was granted in.
  const local = iso.leases.fromLease.has(d);
  for (const c of m.changes) {
    if (c.answeredAt === null) continue;
    if (!(sent.seq > c.answeredSeq) || d.policyVersion >= c.policy.version) continue;
    if (local) {
      if (sent.at >= c.answeredAt + ISOLATE_LEASE_MS)
        violation(
          m,
          `${at}: admitted under policy ${d.policyVersion} (isolate lease), ${ISOLATE_LEASE_MS} ms after change to ${c.policy.version} was answered`,
        );
      continue;
    }
    if (!c.pushFaulted) {
      violation(
        m,
        `${at}: admitted under policy ${d.policyVersion} after change to ${c.policy.version} was answered (pushed)`,
      );
      continue;
    }
    // Where the push was lost: from a stock (of its minute) or a standing permit (of a minute
    // to come), each minute's at most heldBound of the old policy, all locations together; and
    // only for a request on a copy of the key older than the change, which is read again
    // KEY_CACHE_TTL_MS after it was read: a lost push applies within LOST_PUSH_APPLIES_WITHIN_MS.
    const inMinute = c.admittedAfter.add(minuteStart);
    const before = m.policies.filter((p) => p.policy.version < c.policy.version);
    const oldBound = Math.max(...before.map((p) => heldBound(p.policy)));
    if (inMinute > oldBound)
      violation(
        m,
        `${at}: ${inMinute} admitted in minute ${new Date(minuteStart).toISOString()} under older policies after a lost push of ${c.policy.version} > heldBound ${oldBound}`,
      );
    if (sent.at >= c.answeredAt + LOST_PUSH_APPLIES_WITHIN_MS)
      violation(
        m,
        `${at}: admitted under policy ${d.policyVersion} in minute ${new Date(minuteStart).toISOString()}, ${sent.at - c.answeredAt} ms after a lost push of ${c.policy.version} was answered (bound ${LOST_PUSH_APPLIES_WITHIN_MS} ms)`,
      );
  }

  // X-RateLimit-Remaining (item 6).
  if (REMAINING_EXACT) {
    const shown = bindingWindow(d.windows).remaining;
    const truth = Math.min(
      d.windows[0]!.limit -
        m.servedInMinute.of(minuteStart) -
        m.strandedUnused.inMinute.of(minuteStart),
      d.windows[1]!.limit - m.servedInDay.of(dayStart) - m.strandedUnused.inDay.of(dayStart),
    );
    // Exact for a key used, one request at a time, in one location, with nothing else happening
    // to it (no fault, change, eviction, clock step or usage read): no other isolate sent
    // anything in this minute or the one before (a location's stock is refilled as a minute
    // begins if the key was used there in the minute before), and no other location while
    // standing permits it may have been granted can still be held (they are counted, in their
    // minute and in the day, as used).
    const others = [minuteStart, minuteStart - MINUTE_MS].flatMap((w) => [
      ...(m.isolatesInMinute.get(w) ?? []),
    ]);
    const oneIsolate = others.every((i) => i === iso.index);
    const oneLocation = [...m.locationsInMinute].every(
      ([w, locations]) =>
        w < minuteStart - STANDING_HELD_FOR_MS - MINUTE_MS ||
        [...locations].every((l) => l === iso.location),
    );
    const alone = sent.concurrent === 0 && m.inFlight === 0;
    if (oneIsolate && oneLocation && alone && !m.disturbed) {
      if (shown !== truth) violation(m, `${at}: Remaining ${shown}, truth ${truth} (one location)`);
    } else {
      // The day counted the standing permits other locations hold for the minutes to come at
      // their grant: each minute's within heldBound.
      const minuteBound = heldBoundOfMinute(m, minuteStart);
      const bound =
        bindingWindow(d.windows).name === "day"
          ? minuteBound * (1 + STANDING_MINUTES)
          : minuteBound;
      const twice = ADMISSIONS_COUNTED_ONCE ? 0 : m.deliveredTwice;
      if (shown < truth - bound - m.inFlight - sent.concurrent - twice)
        violation(m, `${at}: Remaining ${shown} more than heldBound ${bound} below truth ${truth}`);
    }
  }
}

/** Checks the key's object against the model (after every command). */
export async function checkObject(m: QuotaModel, r: QuotaReal): Promise<void> {
  const object = env.QUOTA.getByName(r.keyId);
  const usage = await object.usage();
  const minuteStart = usage.minute.resetAt - MINUTE_MS;
  const dayStart = usage.day.resetAt - DAY_MS;
  const bound = heldBoundOfMinute(m, minuteStart);
  // Counted and not served: permits held unused (plus one per request in flight, and, until
  // item 2 is fixed, one per call the object got twice). A request whose decision never came back
  // (every attempt's answer lost after the object acted) is counted once, not a permit held: the
  // Worker fails open for it. Counted in this minute only if the object decided it here, within its
  // id's lifetime (ADMISSION_ID_LIFETIME_MS; a clock stepped back decides in a later minute).
  const madeFrom = minuteStart - ADMISSION_ID_LIFETIME_MS + m.objectSkewMs;
  const madeUntil = minuteStart + MINUTE_MS + ADMISSION_CLOCK_TOLERANCE_MS;
  const unreachedHere = m.unreachedIdsMadeAt.filter((t) => t > madeFrom && t < madeUntil).length;
  const slack =
    m.inFlight +
    r.net.held.length +
    unreachedHere +
    (ADMISSIONS_COUNTED_ONCE ? 0 : m.deliveredTwice);
  const held = usage.minute.count - m.servedInMinute.of(minuteStart);
  const at = `object at ${new Date(m.trueNow + m.objectSkewMs).toISOString()}`;
  if (held > bound + slack)
    violation(
      m,
      `${at}: ${held} permits counted and not served > heldBound ${bound} of the policies its permits were granted under (+${slack} in flight or unanswered)`,
    );
  // Every admission was counted first (a request served is in the object's windows).
  if (usage.day.count < m.servedInDay.of(dayStart))
    violation(
      m,
      `${at}: the day counted ${usage.day.count} < served ${m.servedInDay.of(dayStart)}`,
    );
  // Every admission counted in its minute, a minute the previous release decided in too (it
  // counts a minute's standing permits as the minute starts, as this release does).
  if (usage.minute.count < m.servedInMinute.of(minuteStart))
    violation(
      m,
      `${at}: the minute counted ${usage.minute.count} < served ${m.servedInMinute.of(minuteStart)}`,
    );
}

/**
 * The end of a run: the network heals, everything in flight is answered, every lease is handed
 * back or left to strand, and time passes until every lease is settled. Then the bill: every
 * served request billed once as admitted; permits counted and never served only as stranded.
 */
export async function settleAndBill(m: QuotaModel, r: QuotaReal) {
  const end = `the run's end (after: ${m.log.slice(-6).join("; ") || "nothing"})`;
  await r.net.finishOrStuck(
    `${end}: the network healing and every request answered`,
    (async () => {
      await r.net.heal();
      await r.net.settle();
      await Promise.all([...r.pending]);
      await r.net.settle();
    })(),
  );
  await r.net.finishOrStuck(`${end}: the leases handed back and settled`, handBackAndSettle(m, r));
  const object = env.QUOTA.getByName(r.keyId);
  const { usage, days } = await object.report();
  const twice = ADMISSIONS_COUNTED_ONCE ? 0 : m.deliveredTwice;
  for (const day of days) {
    const dayStart = Date.parse(`${day.day}T00:00:00Z`);
    const served = m.servedInDay.of(dayStart);
    // Billed as admitted: never more than served (a request whose answer never came back may
    // have been counted, and the Worker failed open for it).
    if (day.admitted > served + m.unreached + twice)
      violation(m, `day ${day.day}: billed ${day.admitted} admitted, served ${served}`);
    // Served and not billed: only what may have gone with reports lost (reportsMayBeLost), of
    // the leases granted in this day.
    const lost = servedWithReportsLostIn(m, dayStart);
    if (day.admitted + lost < served)
      violation(
        m,
        `day ${day.day}: billed ${day.admitted} admitted < served ${served} (at most ${lost} of them with reports that may be lost)`,
      );
    if (day.admitted + day.stranded < served)
      violation(
        m,
        `day ${day.day}: admitted ${day.admitted} + stranded ${day.stranded} < served ${served}`,
      );
  }
  const today = days.find((d) => d.day === dayName(usage.day.resetAt - DAY_MS));
  if (today && usage.day.count !== today.admitted + today.stranded + 0)
    violation(
      m,
      `today: the window counts ${usage.day.count}, billed ${today.admitted} admitted + ${today.stranded} stranded`,
    );
}

/**
 * Every isolate hands its lease back, every holder its stock; time passes until every lease is
 * settled (handed back, or left to strand).
 */
async function handBackAndSettle(m: QuotaModel, r: QuotaReal): Promise<void> {
  for (const iso of r.isolates)
    await clockOf.run({ skewMs: iso.skewMs, location: iso.location }, () =>
      iso.leases.giveBackUnused({ giveBack: (x) => env.QUOTA.getByName(r.keyId).returnLease(x) }),
    );
  for (const location of LOCATIONS)
    await env.QUOTA_HOLDER.getByName(holderName(r.keyId, location)).giveBack(r.keyId);
  // The holders' background calls end within BACKGROUND_ENDS_WITHIN_MS (a refill the last
  // requests scheduled, and its stock's hand-back after its minute), or with standing permits
  // STANDING_BACKGROUND_ENDS_WITHIN_MS (their hand-back after their last minute); a lease whose
  // hand-back was lost is settled as stranded within a minute after that (standing permits and
  // the stock granted with them: STRANDED_AFTER_MS after their last minute).
  const backgroundEnds = Math.max(BACKGROUND_ENDS_WITHIN_MS, STANDING_BACKGROUND_ENDS_WITHIN_MS);
  await passTime(m, r, backgroundEnds + MINUTE_MS);
  await r.net.settle();
  // A hand-back lost on its way and on its retry waits for the holder's next call; with none
  // within STRANDED_AFTER_MS of the lease's expiry, what it served is billed as stranded.
  noteReportsMayBeLost(m, handBacksLostWithTheirRetry(r.net.lostBefore));
}

/**
 * The reports of the hand-backs (`returnLease`, `returnLeases`) in `lost` that were lost with
 * their retry: each report lost twice (a hand-back is retried once with the same message). Lost
 * once, the retry brings it.
 */
function handBacksLostWithTheirRetry(lost: readonly CallMade[]): LeaseReport[] {
  const handBacks = lost.filter((call) => /^returnLeases?$/.test(call.method));
  const reports = handBacks.flatMap(reportsCarriedBy);
  const keyOf = ({ id, used = 0 }: LeaseReport) => `${id} ${used}`;
  const timesLost = new Map<string, number>();
  for (const report of reports)
    timesLost.set(keyOf(report), (timesLost.get(keyOf(report)) ?? 0) + 1);
  return reports.filter((report) => (timesLost.get(keyOf(report)) ?? 0) >= 2);
}

function advance(m: QuotaModel, time: { now: number }, ms: number): void {
  m.trueNow += ms;
  time.now += ms;
  m.latestClock = Math.max(m.latestClock, time.now);
}

/**
 * The next alarm of a location holder evicted in this run (by true time: the holder's clock may be
 * skewed), not running already. Only evicted holders are read (reading one starts it).
 */
async function nextHolderAlarm(r: QuotaReal): Promise<{ name: string; at: number } | null> {
  let next: { name: string; at: number } | null = null;
  for (const name of r.alarms.of) {
    if (r.alarms.running.has(name)) continue;
    const alarmAt = await alarmOf(r.net.uncounted(env.QUOTA_HOLDER, name));
    if (alarmAt === null) continue;
    const at = alarmAt - (holderSkews.get(locationOf(name)) ?? 0);
    if (!next || at < next.at) next = { name, at };
  }
  return next;
}

/** Runs location holder `name`'s alarm as the runtime does when it is due (its calls on the network). */
function runHolderAlarm(m: QuotaModel, r: QuotaReal, name: string): void {
  r.alarms.running.add(name);
  const ran = runDurableObjectAlarm(r.net.uncounted(env.QUOTA_HOLDER, name)).then(
    () => undefined,
    (err: unknown) => violation(m, `the alarm of holder ${name} threw: ${String(err)}`),
  );
  const p = ran.finally(() => {
    r.alarms.running.delete(name);
    r.pending.delete(p);
  });
  r.pending.add(p);
}

/**
 * Moves time on by `ms`, as real time passes: each sleep and deadline wakes at its own time, and
 * the work it starts runs (until it waits for something) before time moves on past it.
 */
async function passTime(m: QuotaModel, r: QuotaReal, ms: number): Promise<void> {
  const clockNow = runTime.now;
  const target = clockNow + ms;
  for (;;) {
    const alarm = await nextHolderAlarm(r);
    const next = Math.min(r.net.nextWake() ?? Infinity, alarm?.at ?? Infinity);
    if (next === Infinity || next > target) break;
    if (next > runTime.now) advance(m, runTime, next - runTime.now);
    if (alarm && alarm.at <= runTime.now) runHolderAlarm(m, r, alarm.name);
    await r.net.wakeDue();
    await r.net.settle();
    // Under a scheduler, what the woken work sends goes on in the order it picks.
    if (scheduler) await driveScheduled(scheduler, r.net);
  }
  if (target > runTime.now) advance(m, runTime, target - runTime.now);
  await r.net.wakeDue();
}

// ------------------------------------------------------------------ commands
type Cmd = fc.AsyncCommand<QuotaModel, QuotaReal>;

abstract class Step implements Cmd {
  abstract label(): string;
  check(_m: Readonly<QuotaModel>): boolean {
    return true;
  }
  abstract act(m: QuotaModel, r: QuotaReal): Promise<void>;
  async run(m: QuotaModel, r: QuotaReal): Promise<void> {
    m.log.push(this.label());
    await r.net.finishOrStuck(
      `${this.label()} (after: ${m.log.slice(-6, -1).join("; ") || "nothing"})`,
      (async () => {
        await this.act(m, r);
        await r.net.settle();
        await checkObject(m, r);
      })(),
    );
    if (m.violations.length) throw new Error(`invariant broken:\n${m.violations.join("\n")}`);
  }
  toString(): string {
    return this.label();
  }
}

/** Sends a request from `iso`: the promise of its answer, noted in the model when it comes. */
function send(m: QuotaModel, r: QuotaReal, iso: Isolate): Promise<void> {
  // An isolate's copy of the key lives KEY_CACHE_TTL_MS; an older one is read again from D1,
  // which has the newest policy (the admin API writes it before it pushes).
  if (m.trueNow - iso.policyReadAt >= KEY_CACHE_TTL_MS) {
    iso.policy = m.policy;
    iso.policyReadAt = m.trueNow;
  }
  const now = clock.now();
  const minute = minuteOf(now + iso.skewMs);
  let isolates = m.isolatesInMinute.get(minute);
  if (!isolates) m.isolatesInMinute.set(minute, (isolates = new Set()));
  isolates.add(iso.index);
  let locations = m.locationsInMinute.get(minute);
  if (!locations) m.locationsInMinute.set(minute, (locations = new Set()));
  locations.add(iso.location);
  const sent: Sent = {
    iso,
    at: m.trueNow,
    clockAt: now + iso.skewMs,
    over: Math.max(m.latestMinute, minuteOf(runTime.now)) - MINUTE_MS,
    overByTheClock: minuteOf(runTime.now) - MINUTE_MS,
    seq: ++m.seq,
    concurrent: m.inFlight,
    leasesHeld: r.isolates.filter((i) => i.leases.unusedPermits > 0).length,
  };
  m.inFlight++;
  const policy = iso.policy;
  const answer = clockOf
    .run({ skewMs: iso.skewMs, location: iso.location }, () => iso.client.admit(policy))
    .then((result: AdmitResult) => onAnswer(m, sent, result));
  const p = answer.finally(() => r.pending.delete(p));
  r.pending.add(p);
  return p;
}

/**
 * Moves time on, wake by wake, until `answered` (a request sent now) is in, while its calls are
 * on their way (`Latency`): for as long as two round trips of the longest latency set, the most a
 * request takes that nothing holds. (A request a fault holds goes on waiting.)
 */
async function untilAnswered(m: QuotaModel, r: QuotaReal, answered: Promise<void>): Promise<void> {
  const latest = runTime.now + 2 * longestRoundTrip();
  let done = false;
  void answered.then(() => {
    done = true;
  });
  await r.net.settle();
  while (!done) {
    const next = r.net.nextWake();
    if (next === null || next > latest) return;
    await passTime(m, r, Math.max(0, next - runTime.now));
    await r.net.settle();
  }
}

class Request extends Step {
  constructor(
    readonly isolate: number,
    readonly count: number,
  ) {
    super();
  }
  label() {
    return `Request(isolate ${this.isolate}, ×${this.count})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    const iso = r.isolates[this.isolate % r.isolates.length]!;
    if (m.release === "previous") {
      await decideAsPrevious(m, r, this.count, `isolate ${iso.index}`);
      return;
    }
    for (let i = 0; i < this.count; i++) send(m, r, iso);
  }
}

/**
 * `requests` requests decided by the previous release at the key's object (rolled back to): it
 * opens the object afresh for them (evicted before and after, so this release's code, still
 * running its background work, reads what the previous release wrote), and must find the counts
 * served so far. Nothing happens while the object cannot be evicted (`cannotEvict`: a call held,
 * or one in it waiting for a call on its way).
 */
async function decideAsPrevious(
  m: QuotaModel,
  r: QuotaReal,
  requests: number,
  who: string,
  leaseWant = 0,
): Promise<Awaited<ReturnType<typeof openAndDecideAsPrevious>> | null> {
  m.disturbed = true;
  await r.net.settle();
  if (r.net.cannotEvict("object", r.keyId)) return null;
  const stub = r.net.uncounted(env.QUOTA, r.keyId);
  await r.net.evict("object", r.keyId);
  const now = runTime.now;
  const at = `object at ${new Date(now).toISOString()} (the previous release)`;
  let decided: Awaited<ReturnType<typeof openAndDecideAsPrevious>>;
  try {
    decided = await openAndDecideAsPrevious(stub, now, requests, leaseWant);
  } catch (err) {
    violation(m, `${at}: ${String(err)}`);
    return null;
  }
  // The counts survive the switch: the previous release reads at least what was served.
  const { usage } = decided.opened;
  // The minute it opens in counts the standing permits used in it before (it counts a minute's
  // standing permits as the minute starts): a release that did not fails here.
  if (usage.minuteCount < m.servedInMinute.of(usage.minuteStart))
    violation(
      m,
      `${at}: reads minute count ${usage.minuteCount} < served ${m.servedInMinute.of(usage.minuteStart)}`,
    );
  if (usage.dayCount < m.servedInDay.of(usage.dayStart))
    violation(
      m,
      `${at}: reads day count ${usage.dayCount} < served ${m.servedInDay.of(usage.dayStart)}`,
    );
  for (const d of decided.decisions)
    if (d.outcome === "allowed") served(m, d, `request of ${who} decided by the previous release`);
  await r.net.evict("object", r.keyId);
  return decided;
}

/** Where an isolate of the previous release hands its lease back (`PreviousReleaseLease`). */
type PreviousHandBack = "previous" | "rolledForward" | "never";

/**
 * An isolate of the previous release (its Workers serve after a rollback, and the last of them
 * for a while after the roll forward) asks the key's object, rolled back to the previous release,
 * for a lease of `want` on its request; it serves `use` requests from the lease (at most its
 * permits, before it ends), then hands it back as the previous release does, with the `used` it
 * counted, or, having used none (its answer came with a change, or a stale one), with only what
 * was left unused: to the previous release's object (`previous`), to this release's after a roll
 * forward (`rolledForward`: this release must take back what the release before sends), or never
 * (the isolate went away: its lease is stranded, what it served billed as stranded).
 */
class PreviousReleaseLease extends Step {
  constructor(
    readonly want: number,
    readonly use: number,
    readonly handBack: PreviousHandBack,
  ) {
    super();
  }
  label() {
    return `PreviousReleaseLease(wants ${this.want}, uses ${this.use}, handed back ${this.handBack === "never" ? "never" : this.handBack === "previous" ? "to the previous release" : "after the roll forward"})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.release = "previous";
    const who = "an isolate of the previous release";
    const decided = await decideAsPrevious(m, r, 1, who, this.want);
    const lease = decided?.lease;
    const decision = decided?.decisions[0];
    if (!lease || !decision || m.violations.length) return;
    noteGrantedIn([lease.id], windowStarts(decision).dayStart);
    const used = Math.min(this.use, lease.permits);
    for (let i = 0; i < used; i++) served(m, decision, `request of ${who} served from its lease`);
    const returned: PreviousReturnedLease = { id: lease.id, unused: lease.permits - used, used };
    // To this release's object (after the roll forward) it sends what it sends the release it
    // was granted by: its message, past the model's network (a fault armed for this release's
    // tiers is not this isolate's).
    if (this.handBack === "rolledForward") await new RollForward().act(m, r);
    const fault = this.handBack === "never" ? "never" : "none";
    await previousHandBack(m, r, who, [returned], { batched: false, fault });
  }
}

/** How a call of the previous release's isolate or holder fares on its way to the key's object. */
type PreviousCallFault = "none" | "duplicate" | "loseBefore" | "loseAfter";
const PREVIOUS_CALL_FAULTS: PreviousCallFault[] = ["none", "duplicate", "loseBefore", "loseAfter"];

/**
 * Delivers a call of the previous release's isolate or holder to the key's object as deployed
 * now: the previous release's (`asPrevious`, opened afresh, evicted before and after as
 * `decideAsPrevious` does) or this release's (`asCurrent`, the real object). `fault`: delivered
 * twice (`duplicate`: the first answer comes back), lost before the object acted or after it
 * (no answer). The answer, or null when none came back (while the object cannot be evicted,
 * `cannotEvict`, the call is lost before it acts). A call that throws is a violation.
 */
async function toDeployed<T>(
  m: QuotaModel,
  r: QuotaReal,
  what: string,
  fault: PreviousCallFault,
  asPrevious: (stub: DurableObjectStub, now: number) => Promise<T>,
  asCurrent: (stub: DurableObjectStub<QuotaLimiter>) => Promise<T>,
): Promise<T | null> {
  m.disturbed = true;
  await r.net.settle();
  const deliveries = fault === "loseBefore" ? 0 : fault === "duplicate" ? 2 : 1;
  const release = m.release;
  const at = `${what} to ${release === "previous" ? "the previous release" : "this release"}'s object`;
  let answer: T | null = null;
  for (let i = 0; i < deliveries; i++) {
    let answered: T;
    try {
      if (release === "previous") {
        if (r.net.cannotEvict("object", r.keyId)) return null;
        const stub = r.net.uncounted(env.QUOTA, r.keyId);
        await r.net.evict("object", r.keyId);
        answered = await asPrevious(stub, runTime.now);
        await r.net.evict("object", r.keyId);
      } else answered = await asCurrent(r.net.uncounted(env.QUOTA, r.keyId));
    } catch (err) {
      violation(m, `${at}: ${String(err)}`);
      return null;
    }
    if (i === 0) answer = answered;
    await r.net.settle();
  }
  return fault === "loseAfter" ? null : answer;
}

/** A request served by the previous release's holder or isolate in `minuteStart` (its day's). */
function servedByPrevious(m: QuotaModel, minuteStart: number, at: string): void {
  const windows = [
    { name: "minute", resetAt: minuteStart + MINUTE_MS },
    { name: "day", resetAt: dayOf(minuteStart) + DAY_MS },
  ];
  served(m, { windows } as KeyDecision, at);
}

/** A lease the previous release's isolate or holder holds, as its HeldLease counts it. */
interface PreviousHeld {
  id: string;
  left: number;
  used: number;
  /** Where it may be used: its minute, until it ends (by the object's clock: no skew here). */
  minuteStart: number;
  until: number;
  policyVersion: number;
  admissionIds: string[];
}

/** Its returnOf / StandingStock's report: `{ id, unused, used, ...idsOf(admissionIds) }`. */
const reportOf = (h: PreviousHeld): PreviousReturnedLease => ({
  id: h.id,
  unused: h.left,
  used: h.used,
  ...(h.admissionIds.length > 0 ? { admissionIds: h.admissionIds } : {}),
});

/**
 * Its keepToReturn: one entry per lease, `used` defaulting to 0; a second entry of the same lease
 * adds its unused and keeps the larger used.
 */
function keepToReturn(unreturned: PreviousReturnedLease[], returned: PreviousReturnedLease): void {
  const { id, unused, used = 0, admissionIds = [] } = returned;
  if (unused < 0) return;
  const known = unreturned.find((u) => u.id === id);
  if (!known) {
    unreturned.push({ id, unused, used, ...(admissionIds.length ? { admissionIds } : {}) });
    return;
  }
  known.unused += unused;
  known.used = Math.max(known.used ?? 0, used);
  const ids = [...(known.admissionIds ?? []), ...admissionIds];
  if (ids.length) known.admissionIds = ids;
}

/**
 * The previous release's hand-back of `returning` to the key's object deployed now: its holder's
 * `giveBackAll` (one lease: `returnLease`; more: `returnLeases` with one `returnId`, the same on
 * its retry), or its isolate's `giveBack` (one `returnLease` call each). A call lost before or
 * after the object acted is retried once (callWithOneRetry, on the `.retryable` error); one
 * `duplicate` is delivered twice. Nothing handed back, or `never`: what was used of it is billed
 * as stranded.
 */
async function previousHandBack(
  m: QuotaModel,
  r: QuotaReal,
  who: string,
  returning: PreviousReturnedLease[],
  { batched, fault }: { batched: boolean; fault: PreviousCallFault | "never" },
): Promise<void> {
  if (returning.length === 0) return;
  if (fault === "never") {
    noteReportsMayBeLost(m, returning);
    return;
  }
  const calls: PreviousReturnedLease[][] =
    batched && returning.length > 1 ? [returning] : returning.map((x) => [x]);
  for (const call of calls) {
    const returnId = call.length > 1 ? crypto.randomUUID() : undefined;
    const what = `the hand-back ${fc.stringify(returnId ? { returnId, returning: call } : call[0])} of ${who}`;
    const deliver = (f: PreviousCallFault) =>
      toDeployed(
        m,
        r,
        what,
        f,
        async (stub, now) => {
          await takeBackAsPrevious(stub, now, call, returnId);
          return true;
        },
        async (stub) => {
          if (returnId) await stub.returnLeases({ returnId, returning: call as ReturnedLease[] });
          else await stub.returnLease(call[0] as ReturnedLease);
          return true;
        },
      );
    const answered = await deliver(fault);
    // Lost (before or after it acted): retried once with the same message.
    if (answered === null && (fault === "loseBefore" || fault === "loseAfter")) {
      if ((await deliver("none")) === null) noteReportsMayBeLost(m, call);
    } else if (answered === null) noteReportsMayBeLost(m, call);
  }
}

/**
 * An isolate of the previous release renews its lease: rolled back to, its object grants the
 * isolate's request a lease of up to `want`; the isolate uses half of it or more (at least
 * `use`, never all: its renewsNow renews once half the last grant is used, while some is left),
 * then renews it as its LeaseHolder does (`renewLease(policy, { leaseId, want, holding, used,
 * returning: [], renewalId })`, not retried), to the previous release or, rolled forward
 * meanwhile (`renewedUnder`), to this release's object; the renewal delivered once, twice, or
 * lost before or after the object acted (the isolate goes on with what it holds). It applies the
 * answer as its `renewed` does, uses up to `useAfter` more, and hands back what it holds as its
 * `giveBackUnused` does (one `returnLease` each, `used` named), to the release deployed then
 * (`rolledForward`: after a roll forward) or never.
 */
class PreviousReleaseRenewal extends Step {
  constructor(
    readonly want: number,
    readonly use: number,
    readonly renewedUnder: Deployed,
    readonly fault: PreviousCallFault,
    readonly useAfter: number,
    readonly handBack: PreviousHandBack,
  ) {
    super();
  }
  label() {
    return `PreviousReleaseRenewal(wants ${this.want}, uses ${this.use}, renewed under ${this.renewedUnder} release${this.fault === "none" ? "" : ` ${this.fault}`}, uses ${this.useAfter} more, handed back ${this.handBack})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.release = "previous";
    const who = "an isolate of the previous release";
    const decided = await decideAsPrevious(m, r, 1, who, this.want);
    const granted = decided?.lease;
    const decision = decided?.decisions[0];
    const policy = decided?.opened.policy;
    if (!granted || !decision || !policy || m.violations.length) return;
    const { minuteStart, dayStart } = windowStarts(decision);
    noteGrantedIn([granted.id], dayStart);
    const lease: PreviousHeld = {
      id: granted.id,
      left: granted.permits,
      used: 0,
      minuteStart,
      until: granted.expiresAt,
      policyVersion: decision.policyVersion,
      admissionIds: [],
    };
    const serve = (n: number) => {
      for (let i = 0; i < n && lease.left > 0 && runTime.now < lease.until; i++) {
        lease.left--;
        lease.used++;
        servedByPrevious(m, lease.minuteStart, `request of ${who} served from its lease`);
      }
    };
    const unreturned: PreviousReturnedLease[] = [];
    let inUse: PreviousHeld | null = lease;
    if (granted.permits >= 2) {
      serve(Math.min(granted.permits - 1, Math.max(Math.ceil(granted.permits / 2), this.use)));
      if (this.renewedUnder === "current") await new RollForward().act(m, r);
      const request: PreviousRenewalRequest = {
        leaseId: lease.id,
        want: this.want,
        holding: lease.left,
        used: lease.used,
        returning: [],
        renewalId: crypto.randomUUID(),
      };
      const what = `the renewal ${fc.stringify(request)} of ${who}`;
      const answer = await toDeployed(
        m,
        r,
        what,
        this.fault,
        (stub, now) => renewAsPrevious(stub, now, policy, request, null),
        (stub) => stub.renewLease(policy, request as RenewalRequest) as Promise<PreviousRenewal>,
      );
      if (m.violations.length) return;
      if (answer?.granted) noteGrantedIn([answer.granted.id], windowStarts(answer).dayStart);
      // Its `renewed`: a newer policy or a revocation ends the lease; a grant extends the lease
      // in use, or replaces it (a lease of an earlier minute), or goes back.
      if (answer && (answer.revoked || answer.policyVersion > lease.policyVersion)) {
        keepToReturn(unreturned, reportOf(lease));
        inUse = null;
        if (answer.granted)
          keepToReturn(unreturned, { id: answer.granted.id, unused: answer.granted.permits });
      } else if (answer?.granted) {
        const g = answer.granted;
        if (g.id === lease.id) {
          lease.left += g.permits;
          lease.until = g.expiresAt;
        } else {
          keepToReturn(unreturned, reportOf(lease));
          inUse = { ...lease, id: g.id, left: g.permits, used: 0, until: g.expiresAt };
          inUse.minuteStart = minuteOf(runTime.now);
        }
      }
    }
    if (inUse) {
      const held = inUse;
      for (let i = 0; i < this.useAfter && held.left > 0 && runTime.now < held.until; i++) {
        held.left--;
        held.used++;
        servedByPrevious(m, held.minuteStart, `request of ${who} served from its renewed lease`);
      }
      keepToReturn(unreturned, reportOf(held));
    }
    if (this.handBack === "rolledForward" && m.release === "previous")
      await new RollForward().act(m, r);
    await previousHandBack(m, r, who, unreturned, {
      batched: false,
      fault: this.handBack === "never" ? "never" : "none",
    });
  }
}

/**
 * A location holder of the previous release (in a location of its own, LHR: this release's
 * holders go on elsewhere) and its standing permits, with the object switched between the
 * releases on the way. It asks the key's object deployed then (the previous release with
 * `grantedBy` previous, rolling back if need be; else this release's, rolling forward) for them
 * as its LeaseHolder does at a gap of `gapMs` (its standingWanted): with no stock
 * (`#askStandingIfDue`: `renewLease(policy, { leaseId: "", want: 0, holding: 0, standing,
 * returning, renewalId }, holderName)`), with its refill of a stock (`want: QUIET_STOCK`,
 * `minuteWant`, `standing`), or with a request an isolate there forwarded (`admit(policy,
 * { want: QUIET_STOCK, returning, minuteWant, standing, admissionId }, holderName)`), using up
 * to `stockUse` of the stock in its minute; then for
 * `minutes` minutes serves up to `perMinute` requests in each (from the permit of that minute
 * granted under the key's newest version, each request's admission id noted), the object
 * switched to the other release after the first `switchAfter` minutes (0: never); then hands
 * everything back as it does (`returnLeases`, one `returnId`, or `returnLease` for one lease):
 * at once (`now`: a change or a usage read reports all), after the last minute's end (`atEnd`:
 * its handBackStandingAtEnd), or never; the hand-back `fault`ed on its way. With `lostAnswer`,
 * the answer to its first request from a standing permit is lost on the way to the isolate,
 * which asks the key's object itself with the same admission id (the holder reports that id
 * with the permit: the object counts the request once).
 */
class PreviousReleaseStanding extends Step {
  constructor(
    readonly grantedBy: Deployed,
    readonly gapMs: number,
    /**
     * How it asks: `standing` (its #askStandingIfDue, no stock), `refill` (its refill of a
     * stock, with standing permits), or `admit` (a request forwarded to the key's object, asking
     * for a stock and standing permits on top).
     */
    readonly ask: "standing" | "refill" | "admit",
    readonly stockUse: number,
    readonly minutes: number,
    readonly perMinute: number,
    readonly switchAfter: number,
    readonly handBack: "now" | "atEnd" | "never",
    readonly fault: PreviousCallFault,
    /** The answer to its first request from a standing permit lost on its way to the isolate. */
    readonly lostAnswer = false,
  ) {
    super();
  }
  label() {
    const lost = this.lostAnswer ? ", the first answer lost" : "";
    const stock = this.ask === "standing" ? "" : `, ${this.ask} with a stock used ${this.stockUse}`;
    const sw = this.switchAfter > 0 ? `, switched after ${this.switchAfter} min` : "";
    const f = this.fault === "none" ? "" : ` ${this.fault}`;
    return `PreviousReleaseStanding(granted by ${this.grantedBy} release, gap ${this.gapMs} ms${stock}, ×${this.perMinute} a minute for ${this.minutes} min${lost}${sw}, handed back ${this.handBack}${f})`;
  }
  override check(m: Readonly<QuotaModel>) {
    return m.changes.every((c) => c.answeredAt !== null);
  }
  async act(m: QuotaModel, r: QuotaReal) {
    const who = "a location holder of the previous release";
    const grantee = holderName(r.keyId, PREVIOUS_LOCATION);
    if (this.grantedBy === "current" && m.release === "previous") await new RollForward().act(m, r);
    if (this.grantedBy === "previous" && m.release === "current") {
      m.release = "previous";
      await decideAsPrevious(m, r, 0, "the rollback");
    }
    if (m.violations.length) return;
    const policy = m.policy;
    const now = runTime.now;
    const standing = previousStandingWanted(this.gapMs);
    const minuteWant = previousMinuteStockWanted(now, this.gapMs);
    const asked = `${this.ask === "admit" ? "request" : "ask"} of ${who}`;
    let answer: PreviousRenewal | null;
    if (this.ask === "admit") {
      // A request an isolate there forwarded, decided at the key's object with a stock and
      // standing permits asked for on top (its #exclusiveCall with #minuteWant).
      const request = {
        want: PREVIOUS_QUIET_STOCK,
        returning: [],
        minuteWant,
        standing,
        admissionId: newAdmissionId(now),
      };
      const admitted = await toDeployed(
        m,
        r,
        `the ${asked} ${fc.stringify(request)}`,
        "none",
        (stub, at) => admitAsPrevious(stub, at, policy, request, grantee),
        (stub) => stub.admit(policy, request, grantee) as Promise<PreviousAdmission>,
      );
      if (admitted?.outcome === "allowed") served(m, admitted, `the ${asked}`);
      // Its contact: a stale answer grants nothing; the rest keeps what was granted.
      answer = admitted && {
        policyVersion: admitted.policyVersion,
        revoked: admitted.outcome === "revoked",
        windows: admitted.windows,
        granted: admitted.lease,
        now: admitted.now,
        ...(admitted.standing ? { standing: admitted.standing } : {}),
      };
    } else {
      const ask = this.ask === "refill" ? { want: PREVIOUS_QUIET_STOCK, minuteWant } : { want: 0 };
      const request: PreviousRenewalRequest = {
        leaseId: "",
        ...ask,
        holding: 0,
        standing,
        returning: [],
        renewalId: crypto.randomUUID(),
      };
      answer = await toDeployed(
        m,
        r,
        `the ${asked} ${fc.stringify(request)}`,
        "none",
        (stub, at) => renewAsPrevious(stub, at, policy, request, grantee),
        (stub) =>
          stub.renewLease(policy, request as RenewalRequest, grantee) as Promise<PreviousRenewal>,
      );
    }
    if (!answer || m.violations.length) return;
    const grants = [answer.granted, ...(answer.standing ?? [])].flatMap((g) => (g ? [g.id] : []));
    noteGrantedIn(grants, windowStarts(answer).dayStart);
    const unreturned: PreviousReturnedLease[] = [];
    const held: PreviousHeld[] = [];
    // Its refilled / keepStanding: a newer policy or a revocation keeps nothing.
    const ends = answer.revoked || answer.policyVersion > policy.version;
    for (const s of answer.standing ?? []) {
      if (ends) keepToReturn(unreturned, { id: s.id, unused: s.permits });
      else
        held.push({
          id: s.id,
          left: s.permits,
          used: 0,
          minuteStart: s.minuteStart,
          until: s.minuteStart + MINUTE_MS,
          policyVersion: answer.policyVersion,
          admissionIds: [],
        });
    }
    const g = answer.granted;
    if (g && ends) keepToReturn(unreturned, { id: g.id, unused: g.permits });
    else if (g) {
      const lease: PreviousHeld = {
        id: g.id,
        left: g.permits,
        used: 0,
        minuteStart: minuteOf(now),
        until: g.expiresAt,
        policyVersion: answer.policyVersion,
        admissionIds: [],
      };
      for (let i = 0; i < this.stockUse && lease.left > 0; i++) {
        lease.left--;
        lease.used++;
        lease.admissionIds.push(newAdmissionId(runTime.now));
        servedByPrevious(m, lease.minuteStart, `request of ${who} served from its stock`);
      }
      // Granted with standing permits, it goes back with them; else GIVE_BACK_GRACE_MS after its
      // expiry (its giveBackAtExpiry: the lease's expiresAt, or for a stock for the minute the
      // minute's end, which is its expiresAt too), before any other call can strand it.
      if (held.length > 0) held.push(lease);
      else {
        await passTime(m, r, Math.max(0, lease.until + GIVE_BACK_GRACE_MS - runTime.now));
        await r.net.settle();
        await previousHandBack(m, r, who, [reportOf(lease)], { batched: true, fault: "none" });
      }
    }
    for (let minute = 1; minute <= this.minutes && !m.violations.length; minute++) {
      const at = runTime.now;
      await passTime(m, r, minuteOf(at) + MINUTE_MS + 5_000 - at);
      await r.net.settle();
      const t = runTime.now;
      for (let i = 0; i < this.perMinute; i++) {
        const permit = held.find(
          (h) =>
            h.left > 0 && h.minuteStart <= t && t < h.until && h.policyVersion === m.policy.version,
        );
        if (!permit) break;
        permit.left--;
        permit.used++;
        const admissionId = newAdmissionId(t);
        permit.admissionIds.push(admissionId);
        if (!(this.lostAnswer && minute === 1 && i === 0)) {
          servedByPrevious(
            m,
            permit.minuteStart,
            `request of ${who} served from a standing permit`,
          );
          continue;
        }
        // Its answer lost on the way from the holder: its isolate asks the key's object itself
        // with the same admission id (its client's #admitCall: the same request, `want: 0`).
        const request = { want: 0, returning: [], admissionId };
        const decided = await toDeployed(
          m,
          r,
          `the request ${fc.stringify(request)} of an isolate of the previous release`,
          "none",
          (stub, now) => admitAsPrevious(stub, now, m.policy, request, null),
          (stub) => stub.admit(m.policy, request) as Promise<KeyDecision>,
        );
        if (decided?.outcome === "allowed")
          served(m, decided, `request of ${who} decided again by the key's object`);
      }
      if (minute === this.switchAfter) {
        if (m.release === "previous") await new RollForward().act(m, r);
        else {
          m.release = "previous";
          await decideAsPrevious(m, r, 0, "the rollback");
        }
      }
    }
    if (m.violations.length) return;
    if (this.handBack === "atEnd") {
      const end = Math.max(...held.map((h) => h.until), runTime.now);
      await passTime(m, r, end + GIVE_BACK_GRACE_MS - runTime.now);
    }
    for (const h of held) keepToReturn(unreturned, reportOf(h));
    await previousHandBack(m, r, who, unreturned, {
      batched: true,
      fault: this.handBack === "never" ? "never" : this.fault,
    });
  }
}

/**
 * The previous release decides for `minutes` minutes: `requests` requests a minute at the key's
 * object (`decideAsPrevious`), each minute passed to its end and the network settled, stopping at
 * the first violation.
 */
async function previousReleaseDecides(
  m: QuotaModel,
  r: QuotaReal,
  requests: number,
  minutes: number,
  who: string,
) {
  m.release = "previous";
  for (let i = 0; i < minutes && !m.violations.length; i++) {
    await decideAsPrevious(m, r, requests, who);
    const now = clock.now();
    await passTime(m, r, minuteOf(now) + MINUTE_MS + 1_000 - now);
    await r.net.settle();
  }
}

/**
 * A rollback to the previous release: from now on it decides the key's requests at the key's
 * object (opening it with its own migration list), `requests` of them at once; this release's
 * tiers go on with what they hold (leases, stock, background work) until they end.
 */
class Rollback extends Step {
  constructor(readonly requests: number) {
    super();
  }
  label() {
    return `Rollback(previous release decides ×${this.requests})`;
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "current";
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.release = "previous";
    await decideAsPrevious(m, r, this.requests, "the rollback");
  }
}

/** The roll forward: this release's code opens the key's object with its own list again. */
class RollForward extends Step {
  label() {
    return "RollForward()";
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "previous";
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.disturbed = true;
    m.release = "current";
    await r.net.settle();
    if (!r.net.cannotEvict("object", r.keyId)) await r.net.evict("object", r.keyId);
  }
}

/** Requests sent one at a time in one isolate, each answered before the next, `gapMs` apart. */
class OneAtATime extends Step {
  constructor(
    readonly isolate: number,
    readonly count: number,
    readonly gapMs: number,
  ) {
    super();
  }
  label() {
    return `OneAtATime(isolate ${this.isolate}, ×${this.count}, ${this.gapMs} ms apart)`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    const iso = r.isolates[this.isolate % r.isolates.length]!;
    for (let i = 0; i < this.count; i++) {
      const sentAt = runTime.now;
      await untilAnswered(m, r, send(m, r, iso));
      if (m.violations.length) return;
      // The next one `gapMs` after this one was sent, or as soon as it is answered.
      await passTime(m, r, Math.max(0, sentAt + this.gapMs - runTime.now));
      await r.net.settle();
    }
  }
}

/**
 * A key used alone in one location (three requests 1.5 s apart: its stock for the minute sized
 * to the whole bound), then in a location new to it, `count` requests `gapMs` apart: the key's
 * object has the first location share the bound (restock pushes, see docs/quotas.md, "Sharing
 * the bound with a new location").
 */
class NewLocation extends Step {
  constructor(
    readonly isolate: number,
    readonly count: number,
    readonly gapMs: number,
  ) {
    super();
  }
  label() {
    return `NewLocation(isolate ${this.isolate}, then ×${this.count} ${this.gapMs} ms apart in the next location)`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await new OneAtATime(this.isolate, 3, 1_500).act(m, r);
    if (m.violations.length) return;
    const elsewhere = this.isolate + ISOLATES_PER_LOCATION;
    await new OneAtATime(elsewhere, this.count, this.gapMs).act(m, r);
  }
}

class Advance extends Step {
  constructor(
    readonly to: "ms" | "minuteEnd" | "dayEnd",
    readonly ms: number,
  ) {
    super();
  }
  label() {
    return `Advance(${this.to}, ${this.ms})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    const now = clock.now();
    const target =
      this.to === "ms"
        ? now + this.ms
        : this.to === "minuteEnd"
          ? minuteOf(now) + MINUTE_MS + this.ms
          : dayOf(now) + DAY_MS + this.ms;
    await passTime(m, r, Math.max(1, target - now));
  }
}

/** The key's object's clock steps back (an NTP correction), true time moving on by 1 ms. */
class StepBack extends Step {
  constructor(readonly ms: number) {
    super();
  }
  label() {
    return `StepBack(${this.ms})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.disturbed = true;
    // Every tier's clock (they share one; Skew sets a tier's offset from it).
    m.trueNow += 1;
    time(r).now += 1 - this.ms;
    m.objectSkewMs -= this.ms;
  }
}

/**
 * The key's object's clock steps back `ms` just after it moved into a minute M, when a location
 * asks for standing permits: isolate `isolate`'s location called twice 40 s apart 7 minutes
 * before (its standing permits all ended), the next location's isolate rolls the object into M
 * 10 ms after M starts, the clock steps back, and the first location's next request asks for
 * standing permits (at a gap of 7 minutes); then the next location fills M and the first sends
 * 4 more: a standing permit granted for M itself would admit past M's limit.
 */
class StepBackIntoMinute extends Step {
  constructor(
    readonly isolate: number,
    readonly ms: number,
  ) {
    super();
  }
  label() {
    return `StepBackIntoMinute(isolate ${this.isolate}, ${this.ms})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    const elsewhere = this.isolate + ISOLATES_PER_LOCATION;
    const steps: Step[] = [
      new OneAtATime(this.isolate, 2, 40_000),
      new Advance("ms", 7 * MINUTE_MS),
      new Advance("minuteEnd", 10),
      new OneAtATime(elsewhere, 1, 0),
      new StepBack(this.ms),
      new OneAtATime(this.isolate, 1, 0),
      new OneAtATime(elsewhere, 70, 10),
      new OneAtATime(this.isolate, 4, 300),
    ];
    for (const step of steps) {
      await step.act(m, r);
      if (m.violations.length) return;
    }
  }
}

/** A location holder's (or isolate's) clock runs behind or ahead of the object's. */
class Skew extends Step {
  constructor(
    readonly who: "holder" | "isolate",
    readonly index: number,
    readonly ms: number,
  ) {
    super();
  }
  label() {
    return `Skew(${this.who} ${this.index}, ${this.ms})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.disturbed = true;
    if (this.who === "holder") holderSkews.set(LOCATIONS[this.index % LOCATIONS.length]!, this.ms);
    else r.isolates[this.index % r.isolates.length]!.skewMs = this.ms;
  }
}

/**
 * The round trip between a location (its holder and isolates) and the key's object becomes
 * `ms` of fake time (0: at once): each call between them and its answer take half of it.
 */
class Latency extends Step {
  constructor(
    readonly location: number,
    readonly ms: number,
  ) {
    super();
  }
  label() {
    return `Latency(${LOCATIONS[this.location % LOCATIONS.length]}, round trip ${this.ms} ms)`;
  }
  async act(_m: QuotaModel, _r: QuotaReal) {
    roundTrips.set(LOCATIONS[this.location % LOCATIONS.length]!, this.ms);
  }
}

class Arm extends Step {
  constructor(
    readonly tier: Tier,
    readonly method: string,
    readonly fault: Fault,
  ) {
    super();
  }
  label() {
    return `Arm(${this.fault} ${this.tier}.${this.method})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.disturbed = true;
    r.net.armed.push({ tier: this.tier, method: this.method, fault: this.fault });
    if (
      (this.fault === "duplicate" || this.fault === "loseAfter") &&
      ["admit", "renewLease", "authenticateAndAdmit"].includes(this.method)
    )
      // A request counted twice, or a renewal's grant (at most heldBound) granted twice.
      m.deliveredTwice += this.method === "renewLease" ? heldBound(m.policy) : 1;
  }
}

class Release extends Step {
  constructor(readonly index: number) {
    super();
  }
  label() {
    return `Release(${this.index})`;
  }
  async act(_m: QuotaModel, r: QuotaReal) {
    await r.net.release(this.index);
  }
}

class Evict extends Step {
  constructor(
    readonly target: "object" | "holder",
    readonly index: number,
  ) {
    super();
  }
  label() {
    return `Evict(${this.target}${this.target === "holder" ? ` ${LOCATIONS[this.index % LOCATIONS.length]}` : ""})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await r.net.settle();
    if (this.target === "object") {
      // Its state is all in storage: Remaining stays exact across its eviction.
      if (!r.net.cannotEvict("object", r.keyId)) await r.net.evict("object", r.keyId);
      return;
    }
    const name = holderName(r.keyId, LOCATIONS[this.index % LOCATIONS.length]!);
    if (r.net.cannotEvict("holder", name)) return;
    // What it served from the leases it held in memory only may be lost with it: billed as
    // stranded, not admitted.
    const inMemory = reportsInMemoryOf(name);
    // Permits it held unused in memory stay counted (stranded) in their grant's windows: the
    // truth Remaining is held to is less by them there (where the grant's minute is not known,
    // from the previous release: only bounded from then on).
    for (const { id, unused } of unusedInMemoryOf(name)) {
      const minuteStart = grantMinuteOfLease.get(id);
      if (minuteStart === undefined) m.disturbed = true;
      else {
        m.strandedUnused.inMinute.add(minuteStart, unused);
        m.strandedUnused.inDay.add(billingDayOfLeaseOrThrow(id), unused);
      }
    }
    await r.net.evict("holder", name);
    holderLeases.delete(name);
    r.alarms.of.add(name);
    noteReportsMayBeLost(m, inMemory);
  }
}

/**
 * A change to the key: its plan up or down, revoked (or disabled), enabled, or a new version with
 * the same limits (a roll, with or without grace, or its expiry moved: what the key's record
 * alone decides changes, and every copy older than it is stale).
 */
type ChangeKind = "planUp" | "planDown" | "revoke" | "enable" | "newVersion";
const CHANGE_KINDS: ChangeKind[] = ["planUp", "planDown", "revoke", "enable", "newVersion"];

class ChangeKey extends Step {
  constructor(
    readonly kind: ChangeKind,
    /** Which isolates re-read the key at once (a bit per isolate). */
    readonly learn: number,
  ) {
    super();
  }
  label() {
    return `Change(${this.kind}, isolates learn ${this.learn.toString(2)})`;
  }
  override check(m: Readonly<QuotaModel>) {
    // One change at a time, as the admin API makes them on one key.
    return m.changes.every((c) => c.answeredAt !== null);
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.disturbed = true;
    const p = m.policy;
    const i = PLANS.findIndex((x) => x.perMinute === p.perMinute && x.perDay === p.perDay);
    const limits =
      this.kind === "planUp"
        ? PLANS[Math.min(PLANS.length - 1, i + 1)]!
        : this.kind === "planDown"
          ? PLANS[Math.max(0, i - 1)]!
          : { perMinute: p.perMinute, perDay: p.perDay };
    const revoked = this.kind === "revoke" ? true : this.kind === "enable" ? false : p.revoked;
    const policy: Policy = { ...limits, revoked, version: p.version + 1 };
    m.policy = policy;
    m.policies.push({ policy, from: m.trueNow });
    const change: Change = {
      policy,
      answeredAt: null,
      answeredSeq: 0,
      pushFaulted: false,
      objectClockAtAnswer: 0,
      admittedAfter: new Tally(),
    };
    m.changes.push(change);
    const firedBefore = r.net.fired.length;
    // As the admin API does: the isolate making the change drops its lease, then pushes.
    const maker = r.isolates[0]!;
    maker.policy = policy;
    const push = maker.client.configureOrThrow(policy).then(
      () => {
        change.answeredAt = m.trueNow;
        // The latest the object's clock ever read (its windows only move forward).
        change.objectClockAtAnswer = Math.max(m.trueNow + m.objectSkewMs, m.latestClock);
        change.answeredSeq = ++m.seq;
        change.pushFaulted = r.net.fired.slice(firedBefore).some((f) => f.includes(".keyChanged"));
        for (const iso of r.isolates)
          if ((this.learn >> iso.index) & 1) {
            iso.policy = policy;
            iso.policyReadAt = m.trueNow;
          }
      },
      (err: unknown) => violation(m, `the push of ${policy.version} failed: ${String(err)}`),
    );
    const tracked = push.finally(() => r.pending.delete(tracked));
    r.pending.add(tracked);
  }
}

/**
 * A change whose pushes to every location holder are lost, made while a sparse key holds standing
 * permits: the key called in isolate `isolate` 3 times `callGapMs` apart (its holder asks for
 * standing permits: of 6 minutes to come at 40 s, 30 at 5 minutes), then every holder's
 * `keyChanged` lost, the change made (no isolate learns it at once: each keeps its cached copy
 * until it reads the key again), then `count` requests in that isolate `gapMs` apart, across
 * minute ends.
 */
class LostPushWhileStanding extends Step {
  constructor(
    readonly isolate: number,
    readonly kind: ChangeKind,
    readonly count: number,
    readonly gapMs: number,
    /**
     * A fault on the key's object's next `returnLeases`: the holder's hand-back of the standing
     * permits of the older version once it sees the newer one (or whichever batch goes first).
     */
    readonly handBackFault: Fault | "none" = "none",
    /** How far apart the key calls before the change. */
    readonly callGapMs = 40_000,
  ) {
    super();
  }
  label() {
    const fault =
      this.handBackFault === "none" ? "" : `, ${this.handBackFault} object.returnLeases`;
    const calls = this.callGapMs === 40_000 ? "" : `, called ${this.callGapMs} ms apart`;
    return `LostPushWhileStanding(isolate ${this.isolate}${calls}, ${this.kind}${fault}, then ×${this.count} ${this.gapMs} ms apart)`;
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "current" && m.changes.every((c) => c.answeredAt !== null);
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await new OneAtATime(this.isolate, 3, this.callGapMs).act(m, r);
    if (m.violations.length) return;
    for (const _ of LOCATIONS)
      r.net.armed.push({ tier: "holder", method: "keyChanged", fault: "loseBefore" });
    await new ChangeKey(this.kind, 0).act(m, r);
    await r.net.settle();
    if (this.handBackFault !== "none")
      r.net.armed.push({ tier: "object", method: "returnLeases", fault: this.handBackFault });
    await new OneAtATime(this.isolate, this.count, this.gapMs).act(m, r);
  }
}

/**
 * A rollback while a sparse key holds standing permits, then the roll forward: the key called in
 * isolate `isolate` 3 times `gapMs` apart (its holder asks for standing permits of the minutes to
 * come: 6 at 40 s, 15 at 150 s), then for `minutes` minutes the previous release decides
 * `requests` requests a minute at the key's object while this release's holders go on with their
 * background work (hand-backs, refills, reports), then this release again, and the key called 3
 * more times `gapMs` apart (the standing permits still held used).
 */
class RollbackWhileStanding extends Step {
  constructor(
    readonly isolate: number,
    readonly requests: number,
    readonly minutes: number,
    readonly gapMs = 40_000,
  ) {
    super();
  }
  label() {
    return `RollbackWhileStanding(isolate ${this.isolate}, every ${this.gapMs / 1_000} s, previous release decides ×${this.requests} a minute for ${this.minutes} min)`;
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "current";
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await new OneAtATime(this.isolate, 3, this.gapMs).act(m, r);
    if (m.violations.length) return;
    await previousReleaseDecides(m, r, this.requests, this.minutes, "the rollback");
    if (m.violations.length) return;
    await new RollForward().act(m, r);
    await new OneAtATime(this.isolate, 3, this.gapMs).act(m, r);
  }
}

/**
 * A sparse key's reports lost on their way, then its holder evicted: the key called in isolate
 * `isolate` 3 times `gapMs` apart (its holder asks for standing permits of the minutes to come and
 * serves the key from them), then the key's object's next two `renewLease` calls lost (`fault`:
 * before or after it acted; a call and its one retry), the key called `gapMs` apart until both
 * were (the holder's renewal, carrying the reports of the standing permits it used), the holder
 * evicted at once, before another call, and the key called `count` more times. Run as fixed
 * lists (test/quota.model-standing.test.ts) and drawn by `quotaCommands`.
 */
class ReportsLostThenEvicted extends Step {
  constructor(
    readonly isolate: number,
    readonly gapMs: number,
    readonly fault: "loseBefore" | "loseAfter",
    readonly count: number,
  ) {
    super();
  }
  label() {
    return `ReportsLostThenEvicted(isolate ${this.isolate}, ${this.gapMs} ms apart, ${this.fault} object.renewLease twice, ×${this.count} after)`;
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "current";
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await new OneAtATime(this.isolate, 3, this.gapMs).act(m, r);
    const firedBefore = r.net.fired.length;
    for (let i = 0; i < 2; i++) await new Arm("object", "renewLease", this.fault).act(m, r);
    const isThisFault = (f: string) =>
      f.startsWith(`${this.fault} object `) && f.endsWith(".renewLease");
    const lost = () => r.net.fired.slice(firedBefore).filter(isThisFault).length >= 2;
    // Requests `gapMs` apart, time passing a second at a time: the holder is evicted as soon as
    // both calls were lost, before it makes another.
    const iso = r.isolates[this.isolate % r.isolates.length]!;
    for (let i = 0; i < 15 && !lost() && !m.violations.length; i++) {
      const sentAt = runTime.now;
      await untilAnswered(m, r, send(m, r, iso));
      while (!lost() && !m.violations.length && runTime.now < sentAt + this.gapMs) {
        await passTime(m, r, Math.min(1_000, sentAt + this.gapMs - runTime.now));
        await r.net.settle();
      }
    }
    if (m.violations.length) return;
    await new Evict("holder", LOCATIONS.indexOf(iso.location as (typeof LOCATIONS)[number])).act(
      m,
      r,
    );
    await new OneAtATime(this.isolate, this.count, this.gapMs).act(m, r);
  }
}

/**
 * A sparse key that stops calling: `count` requests in one isolate `gapMs` apart (its holder
 * asks for standing permits of the minutes to come), then a fault on the key's object's next
 * `returnLeases` (the holder's batched hand-back: of a minute's stock, or of the standing
 * permits left at their end; lost before or after the object acted and retried, delivered twice,
 * or its call or answer held until a Release), and time passing until the holder's background
 * work for the key has ended (STANDING_BACKGROUND_ENDS_WITHIN_MS).
 */
class StopsCalling extends Step {
  constructor(
    readonly isolate: number,
    readonly count: number,
    readonly gapMs: number,
    readonly fault: Fault | "none",
  ) {
    super();
  }
  label() {
    return `StopsCalling(isolate ${this.isolate}, ×${this.count} ${this.gapMs} ms apart, then ${this.fault} object.returnLeases)`;
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "current";
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await new OneAtATime(this.isolate, this.count, this.gapMs).act(m, r);
    if (m.violations.length) return;
    if (this.fault !== "none") {
      m.disturbed = true;
      r.net.armed.push({ tier: "object", method: "returnLeases", fault: this.fault });
    }
    await passTime(m, r, STANDING_BACKGROUND_ENDS_WITHIN_MS);
  }
}

/**
 * A second location gets the key's permits while a first holds them: the key calls in isolate
 * `first` 3 times 40 s apart (its holder holds a stock for the minute and standing permits of
 * the minutes to come), then `count` rounds of one request there and one in an isolate of
 * another location (`other` picks which), `gapMs` apart.
 */
class SecondLocation extends Step {
  constructor(
    readonly first: number,
    readonly other: number,
    readonly count: number,
    readonly gapMs: number,
  ) {
    super();
  }
  label() {
    return `SecondLocation(isolate ${this.first}, then ×${this.count} with isolate ${this.secondIndex()}, ${this.gapMs} ms apart)`;
  }
  /** An isolate in another location than `first`'s. */
  secondIndex(): number {
    const firstLocation = Math.floor((this.first % ISOLATES) / ISOLATES_PER_LOCATION);
    const location = (firstLocation + 1 + (this.other % (LOCATIONS.length - 1))) % LOCATIONS.length;
    return location * ISOLATES_PER_LOCATION + (this.other % ISOLATES_PER_LOCATION);
  }
  override check(m: Readonly<QuotaModel>) {
    return m.release === "current";
  }
  async act(m: QuotaModel, r: QuotaReal) {
    await new OneAtATime(this.first, 3, 40_000).act(m, r);
    for (let i = 0; i < this.count && !m.violations.length; i++) {
      await new OneAtATime(this.first, 1, 0).act(m, r);
      if (m.violations.length) return;
      await new OneAtATime(this.secondIndex(), 1, this.gapMs).act(m, r);
    }
  }
}

/** A usage read in one isolate (hands its lease and its location's stock back). */
class ReadUsage extends Step {
  constructor(readonly isolate: number) {
    super();
  }
  label() {
    return `ReadUsage(isolate ${this.isolate})`;
  }
  async act(m: QuotaModel, r: QuotaReal) {
    m.disturbed = true;
    const iso = r.isolates[this.isolate % r.isolates.length]!;
    const read = clockOf.run({ skewMs: iso.skewMs, location: iso.location }, () =>
      iso.client.usage(iso.policy),
    );
    const p = read.then(() => undefined).finally(() => r.pending.delete(p));
    r.pending.add(p);
  }
}

/** The scheduler ordering calls and answers in this run (null: none). */
let scheduler: fc.Scheduler | null = null;

/**
 * Runs the work started until nothing is left but sleeps (background work waiting for time):
 * whenever everything else has settled, `s` lets one of the calls or answers waiting at the
 * network's gates go on.
 */
async function driveScheduled(s: fc.Scheduler, net: Network): Promise<void> {
  for (let steps = 0; ; steps++) {
    await net.settle();
    net.offerGates(s);
    if (s.count() === 0) return;
    if (steps > 5_000) throw new Error("scheduler: still releasing calls after 5,000 steps");
    await s.waitNext(1);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    await net.gatesOpened();
  }
}

/** Work started together in one round under a scheduler, then time moving on. */
export interface ScheduledRound {
  work: Step[];
  thenMs: number;
}

/**
 * A fresh model world: the network installed over the real tiers, the objects' clocks and time
 * mocked; `setup(plan)` starts a run on a new key at `start`.
 */
export function modelWorld(time: { now: number }, start: number) {
  const net = installModelWorld(time);
  installObjectClocks(net);
  useTime(time);
  return { net, setup: modelSetup(net, time, start) };
}

export type ModelRun = ReturnType<ReturnType<typeof modelSetup>>;

/**
 * Runs a fixed command list once on a key of `PLANS[plan]` in a fresh world from `start`: the
 * model and real side it ran on, and what the run threw (null if nothing).
 */
export async function runCommands(
  time: { now: number },
  start: number,
  plan: number,
  commands: fc.AsyncCommand<QuotaModel, QuotaReal>[],
): Promise<{ ran: ModelRun; thrown: unknown }> {
  const { setup } = modelWorld(time, start);
  let ran: ModelRun | null = null;
  const thrown = await fc
    .asyncModelRun(() => {
      ran = setup(plan);
      return ran;
    }, commands)
    .then(
      () => null,
      (err: unknown) => err ?? new Error("the run threw nothing"),
    );
  return { ran: ran!, thrown };
}

/**
 * Runs a fixed command list on a key of `PLANS[plan]`, starting at `start`, then heals and bills:
 * the invariants the model found broken. A failed command only ends the run early; what it broke
 * is in the violations.
 */
export async function violationsOfCommands(
  time: { now: number },
  start: number,
  plan: number,
  commands: fc.AsyncCommand<QuotaModel, QuotaReal>[],
): Promise<string[]> {
  const { model, real } = (await runCommands(time, start, plan, commands)).ran;
  await settleAndBill(model, real);
  return model.violations;
}

/** `violationsOfCommands` for the fixed lists of one test file: its clock, its runs' start. */
export function fixedListRunner(time: { now: number }, start: number) {
  return (plan: number, commands: fc.AsyncCommand<QuotaModel, QuotaReal>[]) =>
    violationsOfCommands(time, start, plan, commands);
}

/**
 * Rounds of concurrent work for fc.scheduler(): requests from any isolate, a change to the key
 * (plan up or down, revoked, enabled) that some isolates learn at once, usage reads (which hand
 * an isolate's lease and its location's stock back); then time moves on by up to 2.5 s (renewals,
 * hand-backs at expiry).
 */
export function scheduledRounds() {
  const isolate = fc.nat({ max: ISOLATES - 1 });
  const work = fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(isolate, fc.integer({ min: 1, max: 4 }))
        .map(([i, n]): Step => new Request(i, n)),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(...CHANGE_KINDS), fc.nat({ max: 63 }))
        .map(([k, l]): Step => new ChangeKey(k, l)),
    },
    { weight: 1, arbitrary: isolate.map((i): Step => new ReadUsage(i)) },
  );
  return fc.array(
    fc.record({
      work: fc.array(work, { minLength: 1, maxLength: 6 }),
      thenMs: fc.integer({ min: 0, max: 2_500 }),
    }),
    { minLength: 1, maxLength: 5 },
  );
}

/**
 * Runs `rounds` with every call between the tiers and every answer ordered by `s`: each round's
 * work is started together, run until only sleeps are left, and checked; then time moves on.
 */
export async function runScheduledRounds(
  s: fc.Scheduler,
  m: QuotaModel,
  r: QuotaReal,
  rounds: ScheduledRound[],
): Promise<void> {
  scheduler = s;
  r.net.scheduleCalls(true);
  try {
    for (const round of rounds) {
      const work = round.work.filter((step) => step.check(m));
      await r.net.finishOrStuck(
        `the round ${work.map((step) => step.label()).join(", ")}`,
        (async () => {
          for (const step of work) {
            m.log.push(step.label());
            await step.act(m, r);
          }
          await driveScheduled(s, r.net);
          await checkObject(m, r);
        })(),
      );
      if (m.violations.length) throw new Error(`invariant broken:\n${m.violations.join("\n")}`);
      if (round.thenMs === 0) continue;
      m.log.push(`Advance(ms, ${round.thenMs})`);
      await r.net.finishOrStuck(
        `Advance(ms, ${round.thenMs}) after the round`,
        (async () => {
          await passTime(m, r, round.thenMs);
          await driveScheduled(s, r.net);
          await checkObject(m, r);
        })(),
      );
      if (m.violations.length) throw new Error(`invariant broken:\n${m.violations.join("\n")}`);
    }
  } finally {
    r.net.scheduleCalls(false);
    scheduler = null;
  }
}

/** The real clock of the run (set by the test). */
let runTime: { now: number } = { now: 0 };
const time = (_r: QuotaReal) => runTime;
export function useTime(t: { now: number }): void {
  runTime = t;
}

const OBJECT_METHODS = ["admit", "renewLease", "returnLease", "returnLeases"] as const;
const HOLDER_METHODS = ["admit", "keyChanged", "giveBack", "restock"] as const;
const FAULTS: Fault[] = ["holdCall", "holdAnswer", "duplicate", "loseBefore", "loseAfter"];

/** The commands, with the features this run explores. */
export function quotaCommands({ stepsBack }: { stepsBack: boolean }) {
  const isolate = fc.nat({ max: ISOLATES - 1 });
  const arbs: fc.Arbitrary<Cmd>[] = [
    fc.tuple(isolate, fc.integer({ min: 1, max: 4 })).map(([i, n]) => new Request(i, n)),
    fc.tuple(isolate, fc.integer({ min: 1, max: 4 })).map(([i, n]) => new Request(i, n)),
    fc
      .tuple(isolate, fc.integer({ min: 2, max: 30 }), fc.integer({ min: 10, max: 1_500 }))
      .map(([i, n, gap]) => new OneAtATime(i, n, gap)),
    // A sparse key: a request every few seconds to a minute and more (stocks for the minute,
    // the minute's refills and their hand-backs).
    fc
      .tuple(isolate, fc.integer({ min: 2, max: 5 }), fc.integer({ min: 4_000, max: 70_000 }))
      .map(([i, n, gap]) => new OneAtATime(i, n, gap)),
    // A key used alone in one location, then in another: the first shares the bound.
    fc
      .tuple(isolate, fc.integer({ min: 1, max: 4 }), fc.integer({ min: 50, max: 2_000 }))
      .map(([i, n, gap]) => new NewLocation(i, n, gap)),
    // A key calling every 30 s to every 6 minutes in one isolate: a gap of 30 s or more, known
    // from its second request on, past the minute's stock and into the minutes to come.
    fc
      .tuple(isolate, fc.integer({ min: 3, max: 8 }), fc.integer({ min: 30_000, max: 360_000 }))
      .map(([i, n, gap]) => new OneAtATime(i, n, gap)),
    fc.integer({ min: 1, max: 3_000 }).map((ms) => new Advance("ms", ms)),
    fc.integer({ min: -40, max: 30 }).map((ms) => new Advance("minuteEnd", ms)),
    fc.integer({ min: -40, max: 30 }).map((ms) => new Advance("dayEnd", ms)),
    fc
      .tuple(
        fc.constantFrom<Tier>("object"),
        fc.constantFrom(...OBJECT_METHODS),
        fc.constantFrom(...FAULTS),
      )
      .map(([t, mth, f]) => new Arm(t, mth, f)),
    fc
      .tuple(
        fc.constantFrom<Tier>("holder"),
        fc.constantFrom(...HOLDER_METHODS),
        fc.constantFrom(...FAULTS),
      )
      .map(([t, mth, f]) => new Arm(t, mth, f)),
    fc.nat({ max: 7 }).map((i) => new Release(i)),
    fc
      .tuple(
        fc.nat({ max: LOCATIONS.length - 1 }),
        fc.oneof(
          fc.constant(0),
          fc.integer({ min: 20, max: 400 }),
          fc.integer({ min: 400, max: 2_500 }),
        ),
      )
      .map(([l, ms]) => new Latency(l, ms)),
    fc
      .tuple(fc.constantFrom<"object" | "holder">("object", "holder"), fc.nat({ max: 2 }))
      .map(([t, i]) => new Evict(t, i)),
    fc
      .tuple(fc.constantFrom(...CHANGE_KINDS), fc.nat({ max: 63 }))
      .map(([k, l]) => new ChangeKey(k, l)),
    isolate.map((i) => new ReadUsage(i)),
    fc.integer({ min: 0, max: 3 }).map((n) => new Rollback(n)),
    fc.constant(new RollForward()),
    fc
      .tuple(
        fc.integer({ min: 1, max: 8 }),
        fc.nat({ max: 8 }),
        fc.constantFrom<PreviousHandBack>("previous", "rolledForward", "never"),
      )
      .map(([want, use, back]) => new PreviousReleaseLease(want, use, back)),
    fc
      .tuple(
        fc.integer({ min: 1, max: 8 }),
        fc.nat({ max: 6 }),
        fc.constantFrom<Deployed>("previous", "current"),
        fc.constantFrom(...PREVIOUS_CALL_FAULTS),
        fc.nat({ max: 8 }),
        fc.constantFrom<PreviousHandBack>("previous", "rolledForward", "never"),
      )
      .map(
        ([want, use, under, fault, more, back]) =>
          new PreviousReleaseRenewal(want, use, under, fault, more, back),
      ),
    fc
      .tuple(
        fc.constantFrom<Deployed>("previous", "current"),
        fc.integer({ min: 30_000, max: 90_000 }),
        fc.constantFrom("standing", "refill", "admit" as const),
        fc.nat({ max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.nat({ max: 3 }),
        fc.constantFrom("now", "atEnd", "never" as const),
        fc.constantFrom(...PREVIOUS_CALL_FAULTS),
        fc.boolean(),
      )
      .map((a) => new PreviousReleaseStanding(...a)),
    fc
      .tuple(
        isolate,
        fc.constantFrom(...CHANGE_KINDS),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 2_000, max: 45_000 }),
        fc.constantFrom<Fault | "none">("none", ...FAULTS),
        // Called 40 s apart (standing permits of 6 minutes to come) or up to 5 minutes (of 30).
        fc.oneof(fc.constant(40_000), fc.integer({ min: 60_000, max: 300_000 })),
      )
      .map(([i, k, n, gap, f, calls]) => new LostPushWhileStanding(i, k, n, gap, f, calls)),
    fc
      .tuple(
        isolate,
        fc.integer({ min: 0, max: 14 }),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(40_000, 150_000),
      )
      .map(([i, n, minutes, gap]) => new RollbackWhileStanding(i, n, minutes, gap)),
    fc
      .tuple(
        isolate,
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 20_000, max: 90_000 }),
        fc.constantFrom<Fault | "none">("none", ...FAULTS),
      )
      .map(([i, n, gap, f]) => new StopsCalling(i, n, gap, f)),
    fc
      .tuple(
        isolate,
        fc.nat({ max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1_000, max: 45_000 }),
      )
      .map(([i, o, n, gap]) => new SecondLocation(i, o, n, gap)),
    fc
      .tuple(
        isolate,
        fc.integer({ min: 30_000, max: 90_000 }),
        fc.constantFrom<"loseBefore" | "loseAfter">("loseBefore", "loseAfter"),
        fc.integer({ min: 1, max: 3 }),
      )
      .map(([i, gap, f, n]) => new ReportsLostThenEvicted(i, gap, f, n)),
  ];
  if (stepsBack)
    arbs.push(
      fc.integer({ min: 1, max: 1_500 }).map((ms) => new StepBack(ms)),
      fc
        .tuple(fc.nat({ max: ISOLATES - 1 }), fc.integer({ min: 20, max: 1_500 }))
        .map(([i, ms]) => new StepBackIntoMinute(i, ms)),
      fc
        .tuple(
          fc.constantFrom<"holder" | "isolate">("holder", "isolate"),
          fc.nat({ max: 5 }),
          fc.integer({ min: -2_000, max: 2_000 }),
        )
        .map(([w, i, ms]) => new Skew(w, i, ms)),
    );
  return arbs;
}

export {
  Advance,
  Arm,
  ChangeKey,
  Evict,
  Latency,
  LostPushWhileStanding,
  NewLocation,
  OneAtATime,
  PreviousReleaseLease,
  PreviousReleaseRenewal,
  PreviousReleaseStanding,
  ReadUsage,
  Release,
  ReportsLostThenEvicted,
  Request,
  Rollback,
  RollbackWhileStanding,
  RollForward,
  SecondLocation,
  Skew,
  StepBack,
  StepBackIntoMinute,
  StopsCalling,
};
