import { describe, expect, it } from "vitest";
import { RESTORED_STANDING_MARGIN_MS } from "../../src/objects/holder-standing-memory";
import {
  STANDING_BACKGROUND_ENDS_WITHIN_MS,
  STOPPED_KEY_OBJECT_CALLS,
} from "../../src/quota/standing";
import {
  benchCallsOrThrow,
  byTime,
  callsPerThousandOf,
  keyCost,
  keysForSamples,
  nearMinuteEdge,
  STOPPED_KEY_OBJECT_CALLS as REPORTED_OBJECT_CALLS,
  RESTORED_MARGIN_MS,
  STOPPED_KEY_CALLS_END_WITHIN_MS,
  scenarioCost,
  secondsIntoMinute,
  sparsePlan,
  TAIL_SECONDS,
  waitedForFarCall,
} from "../lib/quota-scenarios.mjs";
import benchReadme from "../README.md?raw";

const header = (limiter: number, local: number, forwarded: number, background: number) =>
  `limiter=${limiter}, d1=0, d1-pets=0, local=${local}, forwarded=${forwarded}, background=${background}`;

describe("bench:quota's X-Bench-Calls", () => {
  it("reads every count, and refuses a response without the header", () => {
    expect(
      benchCallsOrThrow("limiter=2, d1=3, d1-pets=1, local=4, forwarded=1, background=1"),
    ).toEqual({ limiter: 2, d1: 3, d1Pets: 1, local: 4, forwarded: 1, background: 1 });
    expect(() => benchCallsOrThrow(null)).toThrow(/without X-Bench-Calls/);
    expect(() => benchCallsOrThrow("limiter=1")).toThrow(/without X-Bench-Calls/);
  });

  it("far calls waited for: the Worker's limiter calls it waited for plus the holder's forwards", () => {
    const samples = [
      { calls: header(0, 1, 1, 0) }, // forwarded by the holder
      { calls: header(1, 0, 0, 1) }, // a renewal in the background
      { calls: header(1, 0, 0, 0) }, // waited for
      { calls: header(0, 1, 0, 0) }, // from the holder's stock
    ];
    expect(callsPerThousandOf(samples)).toEqual({ far: 500, background: 250, local: 500 });
  });
});

describe("bench:quota's requests by place in the minute", () => {
  const minute = 29_000_000 * 60_000;
  const samples = [
    { calls: header(0, 1, 1, 0), startAt: minute + 5 * 60_000 + 59_650 }, // forwarded
    { calls: header(1, 0, 0, 1), startAt: minute + 3_000 }, // background only: not far
    { calls: header(0, 1, 0, 0), startAt: minute + 60_000 + 999 }, // from the holder's stock
    { calls: header(1, 0, 0, 0), startAt: minute + 2 * 60_000 + 1_000 }, // waited for
  ];

  it("far calls waited for: the Worker's calls it waited for and the holder's forwards", () => {
    expect(samples.map(waitedForFarCall)).toEqual([true, false, false, true]);
  });

  it("gives each request's seconds into its minute, in time order", () => {
    expect(secondsIntoMinute(samples)).toEqual([3, 1, 1, 59.7]);
    expect(secondsIntoMinute(samples.filter(waitedForFarCall))).toEqual([1, 59.7]);
  });

  it("near a minute's edge: within the restored permits' margin of its start or end", () => {
    expect(RESTORED_MARGIN_MS).toBe(RESTORED_STANDING_MARGIN_MS);
    expect(nearMinuteEdge(samples)).toEqual([samples[0], samples[2]]);
  });
});

describe("bench:quota's sparse schedule", () => {
  it("as many keys as the samples need, each making what fits in the span (at least one)", () => {
    expect(keysForSamples({ gapMs: 10_000, spanMs: 300_000, samples: 150 })).toEqual({
      keys: 5,
      requestsPerKey: 30,
    });
    expect(keysForSamples({ gapMs: 60_000, spanMs: 300_000, samples: 150 })).toEqual({
      keys: 30,
      requestsPerKey: 5,
    });
    expect(keysForSamples({ gapMs: 300_000, spanMs: 300_000, samples: 150 })).toEqual({
      keys: 150,
      requestsPerKey: 1,
    });
    // A gap longer than the span still measures one request per key.
    expect(keysForSamples({ gapMs: 600_000, spanMs: 300_000, samples: 7 })).toEqual({
      keys: 7,
      requestsPerKey: 1,
    });
  });

  it("each key's first request unmeasured, then its requests a gap apart, keys staggered, in time order", () => {
    const plan = sparsePlan({ gapMs: 10_000, keys: 4, requestsPerKey: 2, spreadMs: 10_000 });
    expect(plan).toHaveLength(12);
    for (let i = 1; i < plan.length; i++)
      expect(plan[i]?.at).toBeGreaterThanOrEqual(plan[i - 1]?.at ?? 0);
    expect(plan.filter((r) => r.key === 1)).toEqual([
      { at: 2_500, key: 1, measured: false },
      { at: 12_500, key: 1, measured: true },
      { at: 22_500, key: 1, measured: true },
    ]);
    expect(plan.slice(0, 4).map((r) => [r.key, r.at, r.measured])).toEqual([
      [0, 0, false],
      [1, 2_500, false],
      [2, 5_000, false],
      [3, 7_500, false],
    ]);
    const offset = sparsePlan({
      gapMs: 60_000,
      keys: 2,
      requestsPerKey: 1,
      spreadMs: 60_000,
      offsetMs: 100,
      firstKey: 4,
    });
    expect(offset).toEqual([
      { at: 100, key: 4, measured: false },
      { at: 30_100, key: 5, measured: false },
      { at: 60_100, key: 4, measured: true },
      { at: 90_100, key: 5, measured: true },
    ]);
    // A warm-up of 2: each key's first two requests are its start-up, the measured ones after.
    const warm = sparsePlan({ gapMs: 300_000, keys: 1, requestsPerKey: 2, spreadMs: 0, warmup: 2 });
    expect(warm.map((r) => [r.at, r.measured])).toEqual([
      [0, false],
      [300_000, false],
      [600_000, true],
      [900_000, true],
    ]);
  });

  it("merges schedules by time, keeping the order of ties", () => {
    expect(
      byTime([
        { at: 5, id: "a" },
        { at: 1, id: "b" },
        { at: 5, id: "c" },
        { at: 0, id: "d" },
      ]).map((r) => r.id),
    ).toEqual(["d", "b", "a", "c"]);
  });
});

describe("bench:quota's cost of a key", () => {
  const sent = [
    { startAt: 1_000, endAt: 1_200, measured: false },
    { startAt: 11_000, endAt: 11_020, measured: true },
    { startAt: 21_000, endAt: 21_020, measured: true },
  ];

  it("charges the measured requests for the calls since the first request's answer; the rest is the tail", () => {
    const calls: [number, string, string?][] = [
      [1_050, "local"], // during the first request: warm-up
      [1_200, "relayed"], // at its answer: still warm-up
      [1_201, "relayed", "renewLease"], // after it: the gap before the first measured request
      [11_010, "local", "admit"],
      [15_000, "relayed", "renewLease"],
      [21_010, "local", "admit"],
      [21_020, "relayed"], // at the last answer: charged
      [21_021, "relayed"], // after it: the tail
      [26_020, "pushed"],
      [81_020, "alarm"],
    ];
    expect(keyCost(sent, calls, 321_020)).toEqual({
      measured: 2,
      window: 5,
      windowByKind: { "relayed renewLease": 2, "local admit": 2, relayed: 1 },
      windowMs: 19_820,
      starts: 0,
      tail: 3,
      tailByHop: { relayed: 1, pushed: 1, alarm: 1 },
      lastTailAfterMs: 60_000,
      observedMs: 300_000,
    });
    expect(keyCost(sent, [[5_000, "relayed"]], 22_020)).toEqual({
      measured: 2,
      window: 1,
      windowByKind: { relayed: 1 },
      windowMs: 19_820,
      starts: 0,
      tail: 0,
      tailByHop: {},
      lastTailAfterMs: null,
      observedMs: 1_000,
    });
  });

  it("a key measured from its first request is charged from that request's start", () => {
    const cold = [{ startAt: 500, endAt: 700, measured: true }];
    expect(
      keyCost(
        cold,
        [
          [499, "local"],
          [500, "local"],
          [650, "relayed"],
          [900, "relayed"],
        ],
        1_700,
      ),
    ).toEqual({
      measured: 1,
      window: 2,
      windowByKind: { local: 1, relayed: 1 },
      windowMs: 201,
      starts: 0,
      tail: 1,
      tailByHop: { relayed: 1 },
      lastTailAfterMs: 200,
      observedMs: 1_000,
    });
    expect(() => keyCost([{ startAt: 0, endAt: 1, measured: false }], [], 2)).toThrow(
      /without a measured request/,
    );
  });

  it("a holder constructed while the key calls counts as a start, not as a Durable Object request", () => {
    const calls: [number, string, string?][] = [
      [1_050, "start"], // during the unmeasured first request
      [11_005, "start"], // constructed again (evicted since) for the first measured one
      [11_006, "local", "authenticateAndAdmit"],
      [21_005, "start"],
      [21_006, "local", "authenticateAndAdmit"],
      [80_000, "start"], // by its alarm, after the last request
      [80_000, "alarm"],
    ];
    expect(keyCost(sent, calls, 90_000)).toMatchObject({
      window: 2,
      windowByKind: { "local authenticateAndAdmit": 2 },
      starts: 2,
      tail: 1,
      tailByHop: { alarm: 1 },
    });
    const cost = keyCost(sent, calls, 90_000);
    expect(scenarioCost([cost, { ...cost, starts: 0 }])).toMatchObject({
      doPerThousand: 1_000,
      startsPerThousand: 500,
    });
  });

  it("a scenario's cost: DO requests per 1,000 measured requests, and its keys' tails", () => {
    expect(
      scenarioCost([
        {
          measured: 2,
          window: 3,
          windowByKind: { "limiter renewLease": 3 },
          windowMs: 60_000,
          starts: 1,
          tail: 2,
          tailByHop: { relayed: 1, alarm: 1 },
          lastTailAfterMs: 5_000,
          observedMs: 300_000,
        },
        {
          measured: 2,
          window: 1,
          windowByKind: { "local admit": 1 },
          windowMs: 60_000,
          starts: 0,
          tail: 0,
          tailByHop: {},
          lastTailAfterMs: null,
          observedMs: 200_000,
        },
      ]),
    ).toEqual({
      // Per minute of the keys' windows together (two minutes).
      perMinuteByKind: { "limiter renewLease": 1.5, "local admit": 0.5 },
      doPerThousand: 1_000,
      startsPerThousand: 250,
      tailPerKey: 1,
      tailMostPerKey: 2,
      tailToObjectMostPerKey: 1,
      tailByHop: { relayed: 0.5, alarm: 0.5 },
      lastTailAfterMs: 5_000,
      observedMs: 200_000,
    });
    expect(
      scenarioCost([
        {
          measured: 4,
          window: 1,
          windowByKind: {},
          windowMs: 1,
          starts: 0,
          tail: 0,
          tailByHop: {},
          lastTailAfterMs: null,
          observedMs: 9,
        },
      ]),
    ).toMatchObject({ doPerThousand: 250, lastTailAfterMs: null });
  });
});

describe("bench:quota's watch after a key's last request", () => {
  it("states the product's bounds and, by default, watches long enough for a stopped key's last call", () => {
    expect(REPORTED_OBJECT_CALLS).toBe(STOPPED_KEY_OBJECT_CALLS);
    expect(STOPPED_KEY_CALLS_END_WITHIN_MS).toBe(STANDING_BACKGROUND_ENDS_WITHIN_MS);
    expect(TAIL_SECONDS * 1_000).toBeGreaterThanOrEqual(STANDING_BACKGROUND_ENDS_WITHIN_MS);
    expect(TAIL_SECONDS * 1_000).toBeLessThan(STANDING_BACKGROUND_ENDS_WITHIN_MS + 1_000);
  });

  it("is described in bench/README.md with those numbers", () => {
    const readme = benchReadme.replace(/\s+/g, " ");
    expect(readme).toContain(`\`--tail-seconds\` (${TAIL_SECONDS}) old`);
    expect(readme).toContain(
      `within ${STANDING_BACKGROUND_ENDS_WITHIN_MS / 1_000} s of its last request (\`STANDING_BACKGROUND_ENDS_WITHIN_MS\`)`,
    );
  });
});
