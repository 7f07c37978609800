/// <reference types="vite/client" />
// The numbers the README, docs/ and the client's README promise are each written once in the
// code. Every phrase below that states one is found in the docs, and every number it states equals
// the constant it promises: changing the constant or the docs' number alone fails here.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  KEY_CACHE_TTL_MS,
  KEY_REFRESH_AFTER_MS,
  REFRESH_GIVEN_UP_AFTER_MS,
  REFUSED_KEY_CACHE_TTL_MS,
} from "../src/auth/key-cache";
import { configOrThrow } from "../src/lib/config";
import { REQUEUE_AFTER_MS, WEBHOOK_HOLD_MS, WEBHOOK_TIMEOUT_MS } from "../src/lib/webhook-events";
import { D1_RETRY_MS } from "../src/objects/alarm-schedule";
import {
  HELD_KEY_EXPECTED_AGE_MS,
  HELD_KEY_MAX_AGE_MS,
  HELD_KEY_READ_AHEAD_AGE_MS,
  HELD_KEY_READ_AHEAD_GAP_MAX_MS,
} from "../src/objects/holder-key-record";
import { HAND_BACK_RETRY_MS } from "../src/objects/holder-standing-memory";
import { STRANDED_AFTER_MS } from "../src/objects/lease-ledger";
import { PUSH_DEADLINE_MS } from "../src/objects/stock-sharing";
import { RATE_HORIZON_MS, RECENT_GAPS_MS } from "../src/quota/arrival-rate";
import { OVERLOADED_RETRY_MS } from "../src/quota/fail-open";
import {
  BACKGROUND_ENDS_WITHIN_MS,
  CHANGE_APPLIES_WITHIN_MS,
  GIVE_BACK_GRACE_MS,
  heldBound,
  ISOLATE_LEASE_MS,
  MINUTE_STOCK_ROOM_SHARE,
  QUIET_STOCK,
  RENEW_AHEAD_MARGIN,
  RENEW_AHEAD_MAX_MS,
  RENEW_AHEAD_MIN_MS,
  RENEWALS_TIMED,
  STOCK_BACK_WITHIN_MS,
  STOCK_LEASE_MS,
  STOCK_RENEW_AHEAD_MS,
  STOCK_SHARED_WITHIN_MS,
} from "../src/quota/lease";
import {
  ADMISSION_CLOCK_TOLERANCE_MS,
  ADMISSION_ID_LIFETIME_MS,
  ADMISSION_MEMORY_MS,
} from "../src/quota/lease-messages";
import { PLAN_LIMITS } from "../src/quota/plans";
import {
  STANDING_BACKGROUND_ENDS_WITHIN_MS,
  STANDING_GAP_MS,
  STANDING_MINUTES,
  STANDING_MOST_MINUTES,
  STANDING_REQUESTS_AHEAD,
  STOPPED_KEY_OBJECT_CALLS,
} from "../src/quota/standing";
import { AUTH_FAILURES_PER_MINUTE, banThreshold } from "../src/quota/windows";
import { WRITE_ATTEMPTS } from "../src/routes/admin/write-while-unchanged";
import { IDEMPOTENCY_TTL_MS } from "../src/routes/pets/idempotent-create";
import { USAGE_READS_PER_MINUTE } from "../src/routes/usage/routes";
import { SUNSET_AT } from "../src/schemas/deprecation";
import { DEFAULT_USAGE_DAYS, MAX_USAGE_DAYS, OWN_USAGE_DAYS } from "../src/schemas/usage";

// Read at transform time by Vite.
const docs = import.meta.glob<string>(
  ["../README.md", "../docs/*.md", "../packages/client/README.md"],
  {
    query: "?raw",
    import: "default",
    eager: true,
  },
);
/** The product text: line breaks and Markdown emphasis do not split a phrase. */
const text = Object.values(docs).join("\n").replaceAll("**", "").replace(/\s+/g, " ");

const S = 1_000;
const MIN = 60_000;
const HOUR = 3_600_000;
const NUMBER = "(\\d+(?:\\.\\d+)?)";

/**
 * A promised number: its value in the code, the unit the docs state it in (ms per unit; 1 for a
 * count), and the phrases that state it (`{n}` stands for the number).
 */
interface PromisedNumber {
  name: string;
  value: number;
  unit: number;
  phrases: string[];
}

const PROMISES: PromisedNumber[] = [
  {
    name: "STOPPED_KEY_OBJECT_CALLS",
    value: STOPPED_KEY_OBJECT_CALLS,
    unit: 1,
    phrases: [
      "object at most {n} calls from there after its last request's answer",
      "costs its object at most {n} more calls per location it used",
    ],
  },
  {
    name: "WRITE_ATTEMPTS",
    value: WRITE_ATTEMPTS,
    unit: 1,
    phrases: [
      "A write tries up to {n} times",
      "so up to {n} writes to one record at once all land",
    ],
  },
  {
    name: "WRITE_ATTEMPTS - 1 (the writes one write can lose to)",
    value: WRITE_ATTEMPTS - 1,
    unit: 1,
    phrases: ["A write that meets more than {n} others landing while it tries"],
  },
  {
    name: "CHANGE_APPLIES_WITHIN_MS",
    value: CHANGE_APPLIES_WITHIN_MS,
    unit: S,
    phrases: [
      "takes effect within {n} s everywhere",
      "applies from the key's next request \\(within {n} s everywhere\\)",
      "takes effect within {n} s everywhere: for",
      "Location holders: within {n} s\\.",
      "let in everywhere within {n} s",
      "asks next, within {n} s\\.",
      "reaches every location within {n} s for holders",
    ],
  },
  {
    name: "PUSH_DEADLINE_MS",
    value: PUSH_DEADLINE_MS,
    unit: S,
    phrases: ["waiting at most {n} s for them", "answer by {n} s at most", "waiting {n} s at most"],
  },
  {
    name: "ISOLATE_LEASE_MS",
    value: ISOLATE_LEASE_MS,
    unit: S,
    phrases: [
      "an isolate's own lease {n} s \\(`ISOLATE_LEASE_MS`\\)",
      "within {n} s \\(`ISOLATE_LEASE_MS`\\)",
      "for a lease of {n} s worth of its recent rate",
      "is given up after {n} s;",
      "an ask for {n} s of its recent rate",
      "its lease lives {n} s and is renewed",
    ],
  },
  {
    name: "ISOLATE_LEASE_MS + GIVE_BACK_GRACE_MS (an isolate's permits back)",
    value: ISOLATE_LEASE_MS + GIVE_BACK_GRACE_MS,
    unit: S,
    phrases: [
      "within {n} s for an isolate's own lease",
      "isolate's own lease within {n} s\\)",
      "within {n} s of the last request in that isolate",
    ],
  },
  {
    name: "STOCK_LEASE_MS",
    value: STOCK_LEASE_MS,
    unit: S,
    phrases: [
      "a location holder's stock lives {n} s",
      "a new {n} s lifetime each",
      "at least one request every {n} s in a location",
      "a lease that ends {n} s after the holder's last contact",
      "stops admitting from stock within {n} s",
      "for at most {n} s \\(fail closed",
      "within {n} s where a push was lost",
      "vouched for in the last {n} s",
      "at most {n} s at a location the push did not reach",
    ],
  },
  {
    name: "STOCK_BACK_WITHIN_MS",
    value: STOCK_BACK_WITHIN_MS,
    unit: S,
    phrases: [
      "How fast stranded permits come back: within {n} s\\.",
      "within {n} s of the last grant or renewal",
      "so within {n} s of the last request in that location",
      "come back within {n} s of the last request",
      "{n} s in that location\\)",
    ],
  },
  {
    name: "STOCK_RENEW_AHEAD_MS",
    value: STOCK_RENEW_AHEAD_MS,
    unit: S,
    phrases: ["or {n} s from its expiry"],
  },
  {
    name: "RENEW_AHEAD_MARGIN",
    value: RENEW_AHEAD_MARGIN,
    unit: 1,
    phrases: ["renews its lease {n} × the slowest of its last", "or due for renewal: {n} ×"],
  },
  {
    name: "RENEWALS_TIMED",
    value: RENEWALS_TIMED,
    unit: 1,
    phrases: ["the slowest of its last {n} renewals'", "the slowest of the last {n} is still"],
  },
  {
    name: "RENEW_AHEAD_MIN_MS",
    value: RENEW_AHEAD_MIN_MS,
    unit: 1,
    phrases: ["round trips before it ends \\(at least {n} ms"],
  },
  {
    name: "RENEW_AHEAD_MAX_MS",
    value: RENEW_AHEAD_MAX_MS,
    unit: 1,
    phrases: ["at most {n} ms: half its life"],
  },
  {
    name: "GIVE_BACK_GRACE_MS",
    value: GIVE_BACK_GRACE_MS,
    unit: 1,
    phrases: [
      "or {n} ms after it if no request came",
      "{n} ms on \\(`GIVE_BACK_GRACE_MS`\\)",
      "{n} ms on with no request",
    ],
  },
  {
    name: "STRANDED_AFTER_MS",
    value: STRANDED_AFTER_MS,
    unit: S,
    phrases: [
      "a lease not handed back {n} s after its expiry",
      "{n} s past its expiry \\(`STRANDED_AFTER_MS`\\)",
      "stranded permits {n} s after their lease's expiry",
      "\\({n} s after its expiry, not before its minute ends\\)",
      "still waits for it, {n} s \\(`STRANDED_AFTER_MS`\\)",
    ],
  },
  {
    name: "HAND_BACK_RETRY_MS",
    value: HAND_BACK_RETRY_MS,
    unit: S,
    phrases: ["again by the alarm every {n} s \\(`HAND_BACK_RETRY_MS`\\)"],
  },
  {
    name: "ADMISSION_ID_LIFETIME_MS",
    value: ADMISSION_ID_LIFETIME_MS,
    unit: S,
    phrases: ["only within {n} s of that by its own clock \\(`ADMISSION_ID_LIFETIME_MS`"],
  },
  {
    name: "ADMISSION_CLOCK_TOLERANCE_MS",
    value: ADMISSION_CLOCK_TOLERANCE_MS,
    unit: S,
    phrases: ["more than {n} s ahead, `ADMISSION_CLOCK_TOLERANCE_MS`"],
  },
  {
    name: "ADMISSION_MEMORY_MS",
    value: ADMISSION_MEMORY_MS,
    unit: S,
    phrases: ["keeps each id it decided for {n} s", "The memory, {n} s, is the"],
  },
  {
    name: "HELD_KEY_MAX_AGE_MS",
    value: HELD_KEY_MAX_AGE_MS,
    unit: S,
    phrases: [
      "reads them from D1 again once the copy is {n} s old",
      "one {n} s old \\| a secret of the key",
      "about once per key per location every {n} s",
      "is then at most {n} s old",
      "reaches the holders' copies within {n} s",
    ],
  },
  {
    name: "STOCK_SHARED_WITHIN_MS",
    value: STOCK_SHARED_WITHIN_MS,
    unit: MIN,
    phrases: [
      "asked the key's object for permits in the last {n} minutes \\(`STOCK_SHARED_WITHIN_MS`\\)",
      "no other holder \\(location or isolate\\) asked in the last {n} minutes",
    ],
  },
  {
    name: "HELD_KEY_READ_AHEAD_AGE_MS",
    value: HELD_KEY_READ_AHEAD_AGE_MS,
    unit: S,
    phrases: [
      "the copy would be {n} s old or more \\(`HELD_KEY_READ_AHEAD_AGE_MS`\\)",
      "a copy that would be {n} s old at the key's next request",
    ],
  },
  {
    name: "HELD_KEY_EXPECTED_AGE_MS",
    value: HELD_KEY_EXPECTED_AGE_MS,
    unit: S,
    phrases: [
      "so as to be {n} s old then",
      "the request may come up to {n} s late",
      "to be {n} s old then \\|",
    ],
  },
  {
    name: "HELD_KEY_READ_AHEAD_GAP_MAX_MS",
    value: HELD_KEY_READ_AHEAD_GAP_MAX_MS,
    unit: MIN,
    phrases: [
      "last gap there was over {n} minutes \\(`HELD_KEY_READ_AHEAD_GAP_MAX_MS`\\)",
      "its last gap here, at most {n} minutes",
    ],
  },
  {
    name: "HELD_KEY_READ_AHEAD_GAP_MAX_MS - HELD_KEY_EXPECTED_AGE_MS",
    value: HELD_KEY_READ_AHEAD_GAP_MAX_MS - HELD_KEY_EXPECTED_AGE_MS,
    unit: S,
    phrases: ["the last comes at most {n} s after the key's last request there"],
  },
  {
    name: "KEY_CACHE_TTL_MS",
    value: KEY_CACHE_TTL_MS,
    unit: S,
    phrases: [
      "caches key records \\(by SHA-256 of the key\\) for at most {n} s",
      "keeps the record until its {n} s are over",
      "authenticated in the last {n} s\\)",
    ],
  },
  {
    name: "KEY_REFRESH_AFTER_MS",
    value: KEY_REFRESH_AFTER_MS,
    unit: S,
    phrases: ["and from {n} s on the first request"],
  },
  {
    name: "KEY_CACHE_TTL_MS - KEY_REFRESH_AFTER_MS",
    value: KEY_CACHE_TTL_MS - KEY_REFRESH_AFTER_MS,
    unit: S,
    phrases: ["a key idle for the last {n} s of its record"],
  },
  {
    name: "REFRESH_GIVEN_UP_AFTER_MS",
    value: REFRESH_GIVEN_UP_AFTER_MS,
    unit: S,
    phrases: ["given up after {n} s without an answer"],
  },
  {
    name: "REFUSED_KEY_CACHE_TTL_MS",
    value: REFUSED_KEY_CACHE_TTL_MS,
    unit: S,
    phrases: ["is kept {n} s only"],
  },
  {
    name: "RATE_HORIZON_MS",
    value: RATE_HORIZON_MS,
    unit: S,
    phrases: ["on average over the last {n} s"],
  },
  {
    name: "OVERLOADED_RETRY_MS",
    value: OVERLOADED_RETRY_MS,
    unit: S,
    phrases: ["with `Retry-After: {n}`; the request is not admitted"],
  },
  {
    name: "D1_RETRY_MS",
    value: D1_RETRY_MS,
    unit: MIN,
    phrases: ["tries again {n} minutes later", "the object retries every {n} minutes"],
  },
  {
    name: "BAN_MINUTES",
    value: configOrThrow(env).BAN_MINUTES * MIN,
    unit: MIN,
    phrases: [
      "ban the key for {n} minutes",
      "bans the key for {n} minutes",
      "banned for {n} minutes",
      "a temporary ban \\({n} minutes\\)",
    ],
  },
  {
    name: "heldBound's floor",
    value: heldBound({ perMinute: 0, perDay: 1 }),
    unit: 1,
    phrases: ["`heldBound` \\(a tenth of the per-minute limit, at least {n}\\)"],
  },
  {
    name: "banThreshold's floor",
    value: banThreshold(0),
    unit: 1,
    phrases: [
      "the per-minute limit \\(at least {n}\\)",
      "more than `max\\({n}, perMinute\\)` times",
    ],
  },
  {
    name: "AUTH_FAILURES_PER_MINUTE",
    value: AUTH_FAILURES_PER_MINUTE,
    unit: 1,
    phrases: [
      "{n} guesses a minute",
      "{n} wrong admin tokens a minute",
      "\\({n} a minute per address\\)",
      'failed-authentication window, `RateLimit-Policy: "minute";q={n};w=60`',
    ],
  },
  {
    name: "USAGE_READS_PER_MINUTE",
    value: USAGE_READS_PER_MINUTE,
    unit: 1,
    phrases: ["{n} usage reads per key and minute"],
  },
  {
    name: "MINUTE_STOCK_ROOM_SHARE",
    value: MINUTE_STOCK_ROOM_SHARE,
    unit: 1,
    phrases: ["at least {n} × `heldBound` left"],
  },
  {
    name: "BACKGROUND_ENDS_WITHIN_MS",
    value: BACKGROUND_ENDS_WITHIN_MS,
    unit: S,
    phrases: ["end within {n} s of its last request"],
  },
  {
    name: "STANDING_MINUTES",
    value: STANDING_MINUTES,
    unit: 1,
    phrases: ["in each of the next {n} minutes \\(`STANDING_MINUTES`\\)"],
  },
  {
    name: "STANDING_REQUESTS_AHEAD",
    value: STANDING_REQUESTS_AHEAD,
    unit: 1,
    phrases: [
      "next {n} requests there at its spacing \\(`STANDING_REQUESTS_AHEAD`",
      "one call to the key's object per {n} requests",
    ],
  },
  {
    name: "STANDING_MOST_MINUTES",
    value: STANDING_MOST_MINUTES,
    unit: 1,
    phrases: ["up to the next {n} \\(`STANDING_MOST_MINUTES`\\)"],
  },
  {
    name: "STANDING_MINUTES × heldBound (a free key's: the standing permits a key has out)",
    value: STANDING_MINUTES * heldBound(PLAN_LIMITS.free),
    unit: 1,
    phrases: ["`STANDING_MINUTES` × `heldBound`, {n} for a free key"],
  },
  {
    name: "(STANDING_MINUTES + 1) × heldBound (a free key's: how far a day alert can run ahead of what was served)",
    value: (STANDING_MINUTES + 1) * heldBound(PLAN_LIMITS.free),
    unit: 1,
    phrases: ["minutes \\(at most 6 × `heldBound`\\), {n} for a free key"],
  },
  {
    name: "STANDING_MOST_MINUTES + 1 (how far ahead a standing permit is held)",
    value: STANDING_MOST_MINUTES + 1,
    unit: 1,
    phrases: ["the last minute of those permits, which ends at most {n} minutes after the grant"],
  },
  {
    name: "RECENT_GAPS_MS",
    value: RECENT_GAPS_MS,
    unit: MIN,
    phrases: ["that end within {n} minute of its last request \\(`RECENT_GAPS_MS`\\)"],
  },
  {
    name: "STANDING_GAP_MS",
    value: STANDING_GAP_MS,
    unit: S,
    phrases: ["at least {n} s \\(`STANDING_GAP_MS`"],
  },
  {
    name: "STANDING_BACKGROUND_ENDS_WITHIN_MS",
    value: STANDING_BACKGROUND_ENDS_WITHIN_MS,
    unit: S,
    phrases: ["its last background call at most {n} s after the key's last request there"],
  },
  {
    name: "QUIET_STOCK",
    value: QUIET_STOCK,
    unit: 1,
    phrases: [
      "\\({n} permits, `QUIET_STOCK`\\)",
      "`QUIET_STOCK` \\({n}\\)",
      "refills on each location has {n}",
      "less than {n} \\(`QUIET_STOCK`\\)",
    ],
  },
  {
    name: "REQUEUE_AFTER_MS",
    value: REQUEUE_AFTER_MS,
    unit: MIN,
    phrases: ["queued more than {n} minutes ago and still not attempted"],
  },
  {
    name: "WEBHOOK_HOLD_MS",
    value: WEBHOOK_HOLD_MS,
    unit: S,
    phrases: [
      "The consumer waits at most {n} s for an attempt",
      "by at most {n} s for each batch ahead",
      "an attempt that had no answer after {n} s is retried",
    ],
  },
  {
    name: "OWN_USAGE_DAYS",
    value: OWN_USAGE_DAYS,
    unit: 1,
    phrases: ["`days` holds the last {n} UTC days", "ban and last {n} days"],
  },
  {
    name: "DEFAULT_USAGE_DAYS",
    value: DEFAULT_USAGE_DAYS,
    unit: 1,
    phrases: ["to `to` \\(default: the {n} days"],
  },
  {
    name: "MAX_USAGE_DAYS",
    value: MAX_USAGE_DAYS,
    unit: 1,
    phrases: ["a range over {n} days"],
  },
  {
    name: "IDEMPOTENCY_TTL_MS",
    value: IDEMPOTENCY_TTL_MS,
    unit: HOUR,
    phrases: [
      "Keys are scoped to your API key and kept {n} hours",
      "A record past its {n} h is replaced",
      "the API keeps keys {n} hours",
    ],
  },
  {
    name: "WEBHOOK_TIMEOUT_MS",
    value: WEBHOOK_TIMEOUT_MS,
    unit: S,
    phrases: [
      "each attempt has {n} s from its own request to be answered",
      "no answer within {n} s is retried",
      "retried no sooner than {n} s after that",
    ],
  },
];

/** The numbers each phrase states, in the promise's unit, in the docs' order. */
function statedIn(doc: string, promise: PromisedNumber): Map<string, number[]> {
  const stated = new Map<string, number[]>();
  for (const phrase of promise.phrases) {
    const pattern = new RegExp(phrase.replaceAll("{n}", NUMBER), "g");
    stated.set(
      phrase,
      [...doc.matchAll(pattern)].map((m) => Number(m[1]) * promise.unit),
    );
  }
  return stated;
}

describe("numbers the docs promise, each from its one constant", () => {
  for (const promise of PROMISES) {
    it(`${promise.name}: every phrase that states it is in the docs, with its value`, () => {
      for (const [phrase, numbers] of statedIn(text, promise)) {
        expect(
          numbers.length,
          `"${phrase}" in README.md, docs/ or packages/client/README.md`,
        ).toBeGreaterThan(0);
        for (const n of numbers)
          expect(n, `"${phrase}" states ${promise.name}`).toBe(promise.value);
      }
    });
  }

  it("heldBound: max(N, ⌊perMinute/M⌋) as the docs write it, and each plan's bound they name", () => {
    const formulas = [...text.matchAll(/max\((\d+), ⌊perMinute\/(\d+)⌋\)/g)];
    expect(formulas.length, "max(N, ⌊perMinute/M⌋) in the docs").toBeGreaterThan(1);
    for (const [formula, floor, share] of formulas) {
      for (let perMinute = 0; perMinute <= 2_000; perMinute++) {
        const stated = Math.max(Number(floor), Math.floor(perMinute / Number(share)));
        expect(stated, `${formula} at ${perMinute} a minute`).toBe(
          heldBound({ perMinute, perDay: 1 }),
        );
      }
    }
    const plans = text.match(
      /`heldBound`: (\d+) for a free key, (\d+) for pro, (\d+) for business/,
    );
    expect(plans, "the plans' bounds in docs/quotas.md").not.toBeNull();
    expect(plans!.slice(1).map(Number)).toEqual(
      [PLAN_LIMITS.free, PLAN_LIMITS.pro, PLAN_LIMITS.business].map(heldBound),
    );
    for (const free of text.matchAll(/\((\d+) for a free key\)/g))
      expect(Number(free[1]), free[0]).toBe(heldBound(PLAN_LIMITS.free));
  });

  it("the sunset of GET /v1/pets/{petId}, each way the docs write it, is SUNSET_AT", () => {
    const sunset = new Date(SUNSET_AT);
    const ways: [RegExp, string][] = [
      [
        /removed (\d{1,2} [A-Z][a-z]+ \d{4})/g,
        sunset.toLocaleDateString("en-GB", { dateStyle: "long", timeZone: "UTC" }),
      ],
      [/its sunset \((\S+Z)\)/g, sunset.toISOString().replace(".000Z", "Z")],
      [/`Sunset: ([^`]+)`/g, sunset.toUTCString()],
    ];
    for (const [pattern, expected] of ways) {
      const written = [...text.matchAll(pattern)].map((m) => m[1]);
      expect(written.length, `${pattern} in README.md or docs/`).toBeGreaterThan(0);
      for (const date of written) expect(date, String(pattern)).toBe(expected);
    }
  });

  it("the docs' numbers are read as stated: a changed number or a changed constant fails", () => {
    const promise = PROMISES.find((p) => p.name === "STOCK_LEASE_MS")!;
    const changed = text.replace(
      "a location holder's stock lives 4.75 s",
      "a location holder's stock lives 5 s",
    );
    const numbers = statedIn(changed, promise).get("a location holder's stock lives {n} s")!;
    expect(numbers).toEqual([5_000]);
    expect(numbers[0]).not.toBe(promise.value);
    expect(
      statedIn(text, { ...promise, value: 1 }).get("a location holder's stock lives {n} s"),
    ).toEqual([STOCK_LEASE_MS]);
  });
});
