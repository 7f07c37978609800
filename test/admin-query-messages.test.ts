// The operator API's query parameters are refused in its own words, never in zod's defaults
// ("Too big: expected string to have <=200 characters"): a cursor too long to be one is the same
// 400 as any cursor the API did not issue, and an over-long ownerId filter says its limit.
import { describe, expect, it } from "vitest";
import { invalidCursor } from "../src/lib/errors";
import { ADMIN, call, expectError, fixClock } from "./helpers";

const TOO_LONG = "A".repeat(201);
const UNKNOWN_ENDPOINT = "whe_AAAAAAAAAAAAAAAAAAAA";

describe("operator query parameters past their length", () => {
  it.each([
    "/admin/v1/keys",
    "/admin/v1/webhooks",
    `/admin/v1/webhooks/${UNKNOWN_ENDPOINT}/deliveries`,
    "/admin/v1/audit",
    "/admin/v1/usage?day=2026-11-27",
  ])("GET %s with a 201-character cursor → 400, the invalid-cursor message", async (path) => {
    const sep = path.includes("?") ? "&" : "?";
    const res = await call(`${path}${sep}cursor=${TOO_LONG}`, { headers: ADMIN });
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toBe(invalidCursor().message);
  });

  it.each(["/admin/v1/keys", "/admin/v1/webhooks"])(
    "GET %s?ownerId= with 201 characters → 400 naming the 200-character limit",
    async (path) => {
      const res = await call(`${path}?ownerId=${"o".repeat(201)}`, { headers: ADMIN });
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toBe("ownerId: must be at most 200 characters");
    },
  );
});

describe("empty filters", () => {
  it.each([
    ["/admin/v1/keys?ownerId=", "ownerId"],
    ["/admin/v1/webhooks?ownerId=", "ownerId"],
    ["/admin/v1/keys?q=", "q"],
    ["/admin/v1/audit?actor=", "actor"],
  ])("GET %s → 400 naming the parameter (an owner id is 1–200 characters)", async (path, name) => {
    const body = await expectError(await call(path, { headers: ADMIN }), 400, "invalid_request");
    expect(body.message).toBe(`${name}: must not be empty`);
  });
});

describe("the audit trail's days after today", () => {
  // 12:00 on 2031-07-09 (UTC).
  const NOW = Date.UTC(2031, 6, 9, 12);

  it.each([
    ["tomorrow", "2031-07-10"],
    ["a year on", "2032-07-09"],
  ])("from %s → 400 naming from and today, as the usage reads do", async (_, day) => {
    fixClock(NOW);
    const res = await call(`/admin/v1/audit?from=${day}`, { headers: ADMIN });
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toBe(
      `from: must not be after today (${day} > 2031-07-09, the current UTC day).`,
    );
  });

  it("from today, and a range that ends after today, are answered", async () => {
    fixClock(NOW);
    for (const query of ["from=2031-07-09", "from=2031-07-01&to=2031-08-01", "to=2032-01-01"]) {
      const res = await call(`/admin/v1/audit?${query}`, { headers: ADMIN });
      expect(res.status, query).toBe(200);
      await res.arrayBuffer();
    }
  });
});

describe("days that are not dates", () => {
  it.each([
    ["/admin/v1/usage?day=tomorrow", "day: must be a date YYYY-MM-DD"],
    ["/admin/v1/usage?day=2026-02-30", "day: must be a real calendar date"],
    ["/admin/v1/audit?from=2026-11", "from: must be a date YYYY-MM-DD"],
  ])("GET %s → 400 with one reason, not two", async (path, message) => {
    const body = await expectError(await call(path, { headers: ADMIN }), 400, "invalid_request");
    expect(body.message).toBe(message);
  });
});
