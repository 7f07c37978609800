// Usage is asked of days that have begun: a day after today (UTC) has no usage yet, and answering
// it as "the day so far" with zeros (and `asOf`) or as days of zeros would read as a fact. Both
// usage reads refuse it with a 400 naming the parameter and today; today itself is answered.
import { describe, expect, it } from "vitest";
import { DAY_MS } from "../src/lib/clock";
import { ADMIN, call, expectError, fixClock, issueKey } from "./helpers";

// 23:59:59 on 2031-07-09 (UTC): the next second is another day.
const NOW = Date.UTC(2031, 6, 9, 23, 59, 59);
const TODAY = "2031-07-09";
const TOMORROW = "2031-07-10";

const get = (path: string, headers: Record<string, string> = {}) =>
  call(path, { headers: { ...ADMIN, ...headers } });

describe("GET /admin/v1/usage?day= a day after today", () => {
  it.each([
    ["tomorrow", TOMORROW],
    ["a year on", "2032-07-09"],
  ])("%s → 400 naming day and today", async (_, day) => {
    fixClock(NOW);
    const body = await expectError(await get(`/admin/v1/usage?day=${day}`), 400, "invalid_request");
    expect(body.message).toBe(
      `day: must not be after today (${day} > ${TODAY}, the current UTC day).`,
    );
  });

  it("as CSV too: the 400 is JSON, not a CSV of zeros", async () => {
    fixClock(NOW);
    const res = await get(`/admin/v1/usage?day=${TOMORROW}`, { Accept: "text/csv" });
    expect((await expectError(res, 400, "invalid_request")).message).toMatch(/^day: /);
  });

  it("today is answered (the day so far), and is refused no more once it is over", async () => {
    const time = fixClock(NOW);
    const today = await get(`/admin/v1/usage?day=${TODAY}&limit=1`);
    expect(today.status).toBe(200);
    expect(((await today.json()) as { asOf: string | null }).asOf).toBe(
      new Date(NOW).toISOString(),
    );
    time.now += 1000; // now TOMORROW has begun
    expect((await get(`/admin/v1/usage?day=${TOMORROW}&limit=1`)).status).toBe(200);
  });
});

describe("GET /admin/v1/keys/{id}/usage with days after today", () => {
  it.each([
    ["to", `?from=${TODAY}&to=${TOMORROW}`, TOMORROW],
    ["from", `?from=${TOMORROW}`, TOMORROW],
    ["from", `?from=2031-08-01&to=2031-08-02`, "2031-08-01"],
  ])("%s after today (%s) → 400 naming it and today", async (name, query, day) => {
    fixClock(NOW);
    const { id } = await issueKey("free");
    const body = await expectError(
      await get(`/admin/v1/keys/${id}/usage${query}`),
      400,
      "invalid_request",
    );
    expect(body.message).toBe(
      `${name}: must not be after today (${day} > ${TODAY}, the current UTC day).`,
    );
  });

  it("a range ending today is answered, every day of it", async () => {
    fixClock(NOW);
    const { id } = await issueKey("free");
    const from = new Date(NOW - 2 * DAY_MS).toISOString().slice(0, 10);
    const res = await get(`/admin/v1/keys/${id}/usage?from=${from}&to=${TODAY}`);
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as { data: { day: string }[] };
    expect(data.map((d) => d.day)).toEqual(["2031-07-07", "2031-07-08", TODAY]);
  });
});
