import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import apiGuide from "../docs/api.md?raw";
import { ERROR_STATUS, type ErrorCode } from "../src/lib/errors";
import { PROBLEM_TITLES, prefersProblemJson } from "../src/lib/problem-details";
import { ADMIN, auth, brokenDb, call, callWith, issueKey, mockClock, T0 } from "./helpers";

const time = mockClock(T0);
const PROBLEM = "application/problem+json";

let seq = 0;
/** A client address of its own, so failed-authentication counts never meet between tests. */
const newClient = () => ({ "CF-Connecting-IP": `198.19.${Math.floor(++seq / 250)}.${seq % 250}` });

describe("Accept negotiation (q-values respected; the default stays the Error body)", () => {
  it.each<[string | undefined, boolean]>([
    [undefined, false],
    ["", false],
    ["*/*", false],
    ["application/*", false],
    ["application/json", false],
    ["text/html", false],
    [PROBLEM, true],
    ["Application/Problem+JSON", true],
    [`${PROBLEM}, application/json`, true],
    [`application/json, ${PROBLEM}`, true], // equal q: the client named both, problem details win
    [`${PROBLEM};q=0.9, application/json`, false],
    [`application/json;q=0.5, ${PROBLEM};q=0.8`, true],
    [`${PROBLEM};q=0`, false],
    [`${PROBLEM};q=0.000, */*`, false],
    [`${PROBLEM} ; q=0.5, */*;q=0.1`, true],
    [`${PROBLEM};q=0.5, application/*;q=0.6`, false], // application/* ranks JSON above it
    [`${PROBLEM};q=0.5, application/json;q=0.6`, false],
    [`${PROBLEM};q=2`, false], // an unreadable q drops the range
    [`${PROBLEM};q=abc, application/json`, false],
    [`text/html, ${PROBLEM};charset=utf-8;q=1`, true],
  ])("Accept: %s → problem details: %s", (accept, expected) => {
    expect(prefersProblemJson(accept)).toBe(expected);
  });
});

describe("every error path answers problem details on request", () => {
  type Send = (accept: Record<string, string>) => Promise<Response>;

  /**
   * Sends the same failing request twice, without and with `Accept: application/problem+json`:
   * the first is the Error body, the second RFC 9457 problem details saying the same thing.
   */
  async function expectBothShapes(send: Send, status: number, code: ErrorCode) {
    const plain = await send({});
    const plainText = await plain.text();
    expect(plain.status, plainText).toBe(status);
    expect(plain.headers.get("Content-Type")).toMatch(/^application\/json/);
    const body = JSON.parse(plainText) as { code: string; message: string; status: number };
    expect(body).toEqual({ code, message: expect.any(String), status });

    const problem = await send({ Accept: PROBLEM });
    const text = await problem.text();
    expect(problem.status, text).toBe(status);
    expect(problem.headers.get("Content-Type")).toBe(PROBLEM);
    expect(problem.headers.get("Vary") ?? "").toMatch(/\bAccept\b/);
    expect(JSON.parse(text)).toEqual({
      type: `https://api.example.com/problems/${code}`,
      title: PROBLEM_TITLES[code],
      status,
      detail: body.message,
      code,
    });
    // The other headers of the answer are the same (Retry-After, Allow, WWW-Authenticate…).
    for (const name of ["Retry-After", "Allow", "WWW-Authenticate", "X-RateLimit-Limit"])
      expect(problem.headers.has(name), name).toBe(plain.headers.has(name));
  }

  it("400 from validation", async () => {
    const { key } = await issueKey();
    await expectBothShapes(
      (h) => call("/v1/pets?limit=0", { headers: auth(key, h) }),
      400,
      "invalid_request",
    );
  });

  it("400 from a malformed JSON body", async () => {
    const { key } = await issueKey();
    await expectBothShapes(
      (h) =>
        call("/v1/pets", {
          method: "POST",
          headers: auth(key, { "Content-Type": "application/json", ...h }),
          body: "{not json",
        }),
      400,
      "invalid_request",
    );
  });

  it("401 without a key, on the public and the admin API", async () => {
    const client = newClient();
    await expectBothShapes(
      (h) => call("/v1/pets", { headers: { ...client, ...h } }),
      401,
      "unauthorized",
    );
    await expectBothShapes((h) => call("/admin/v1/keys", { headers: h }), 401, "unauthorized");
  });

  it("403 for a read-only admin token that writes", async () => {
    await expectBothShapes(
      (h) =>
        call("/admin/v1/keys", {
          method: "POST",
          headers: {
            Authorization: "Bearer test-viewer-read-token",
            "Content-Type": "application/json",
            ...h,
          },
          body: JSON.stringify({ name: "x", plan: "free" }),
        }),
      403,
      "forbidden",
    );
  });

  it("404 on an unknown path, with and without a key, and for an unknown pet", async () => {
    const { key } = await issueKey();
    await expectBothShapes((h) => call("/nowhere", { headers: h }), 404, "not_found");
    await expectBothShapes((h) => call("/v1/nothing", { headers: auth(key, h) }), 404, "not_found");
    await expectBothShapes(
      (h) => call("/v1/pets/987654321", { headers: auth(key, h) }),
      404,
      "not_found",
    );
  });

  it("405 with Allow", async () => {
    const { key } = await issueKey();
    await expectBothShapes(
      (h) => call("/v1/pets", { method: "DELETE", headers: auth(key, h) }),
      405,
      "method_not_allowed",
    );
    await expectBothShapes(
      (h) => call("/admin/v1/keys", { method: "PUT", headers: { ...ADMIN, ...h } }),
      405,
      "method_not_allowed",
    );
  });

  it("413 and 415 on a create", async () => {
    const { key } = await issueKey();
    const create = (body: string, type: string) => (h: Record<string, string>) =>
      call("/v1/pets", {
        method: "POST",
        headers: auth(key, { "Content-Type": type, ...h }),
        body,
      });
    await expectBothShapes(
      create(JSON.stringify({ name: "x".repeat(100_000), categoryId: 1 }), "application/json"),
      413,
      "payload_too_large",
    );
    await expectBothShapes(create("name=x", "text/plain"), 415, "unsupported_media_type");
  });

  it("429 rate_limited and quota_exceeded, with Retry-After", async () => {
    time.now = T0 + 10_000;
    const minute = await issueKey("enterprise", { perMinute: 1, perDay: 100 });
    expect((await call("/v1/pets", { headers: auth(minute.key) })).status).toBe(200);
    // Two refusals in a row are below the ban threshold.
    await expectBothShapes(
      (h) => call("/v1/pets", { headers: auth(minute.key, h) }),
      429,
      "rate_limited",
    );
    const day = await issueKey("enterprise", { perMinute: 100, perDay: 1 });
    expect((await call("/v1/pets", { headers: auth(day.key) })).status).toBe(200);
    await expectBothShapes(
      (h) => call("/v1/pets", { headers: auth(day.key, h) }),
      429,
      "quota_exceeded",
    );
  });

  it("500 on an unexpected exception, without details", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const { key } = await issueKey();
    const fail = () => {
      // A constraint broken: a bug of ours rather than an outage, so 500.
      throw new Error("D1_ERROR: CHECK constraint failed: secretThing (SQLITE_CONSTRAINT)");
    };
    const explodingDb = {
      prepare: env.DB.prepare.bind(env.DB),
      batch: env.DB.batch.bind(env.DB),
      withSession: () => ({ prepare: fail, batch: fail, getBookmark: () => null }),
    } as unknown as D1Database;
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    await expectBothShapes(
      (h) => callWith({ DB: explodingDb }, "/v1/pets", { headers: auth(key, h) }),
      500,
      "internal_error",
    );
    vi.restoreAllMocks();
  });

  it("503 from a failing database and from a failing rate limiter (fail closed), with Retry-After", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const { key } = await issueKey("enterprise", { perMinute: 100, perDay: 1000 });
    expect((await call("/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
    await expectBothShapes(
      (h) =>
        callWith({ DB: brokenDb() }, "/v1/pets", {
          method: "POST",
          headers: auth(key, { "Content-Type": "application/json", ...h }),
          body: JSON.stringify({ name: "Lost", categoryId: 1 }),
        }),
      503,
      "service_unavailable",
    );
    // An exception from the limiter's own code is not an outage: the request fails closed. A key
    // this isolate holds no lease for, so the limiter is asked.
    const fresh = await issueKey("enterprise", { perMinute: 100, perDay: 1000 });
    const remoteFailure = Object.assign(new Error("TypeError: x is undefined"), { remote: true });
    const QUOTA = {
      getByName: () => ({ admit: () => Promise.reject(remoteFailure) }),
    } as unknown as Env["QUOTA"];
    await expectBothShapes(
      (h) =>
        callWith({ QUOTA }, "/v1/pets", {
          method: "POST",
          headers: auth(fresh.key, { "Content-Type": "application/json", ...h }),
          body: JSON.stringify({ name: "Uncounted", categoryId: 1 }),
        }),
      503,
      "service_unavailable",
    );
    vi.restoreAllMocks();
  });

  it("a relative type while PUBLIC_ORIGIN is empty (never the request's Host)", async () => {
    const res = await callWith({ PUBLIC_ORIGIN: "" }, "/nowhere", { headers: { Accept: PROBLEM } });
    expect(((await res.json()) as { type: string }).type).toBe("/problems/not_found");
  });

  it("docs/api.md lists every problem type with its title and status, as served", () => {
    const rows = [
      ...apiGuide.matchAll(/^ *\| `\/problems\/([a-z_]+)` \| ([^|]+) \| (\d{3}) \|$/gm),
    ];
    const listed = Object.fromEntries(
      rows.map(([, code, title, status]) => [code, [title!.trim(), Number(status)]]),
    );
    expect(listed).toEqual(
      Object.fromEntries(
        Object.entries(ERROR_STATUS).map(([code, status]) => [
          code,
          [PROBLEM_TITLES[code as ErrorCode], status],
        ]),
      ),
    );
  });
});
