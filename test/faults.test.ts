import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  ADMIN,
  auth,
  brokenDb,
  call,
  callWith,
  type D1FailureMode,
  expect503,
  expectError,
  issueKey,
} from "./helpers";

// How each scenario breaks D1 (the failure says D1_FAILURE: SQL and internals that must not leak).
const MODES = {
  "prepare-throws": "prepare-throws",
  "statement-rejects": "reject",
} satisfies Record<string, D1FailureMode>;

let consoleLines: string[] = [];
function captureConsole() {
  consoleLines = [];
  const capture = (...args: unknown[]) => void consoleLines.push(args.map(String).join(" "));
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation(capture);
}

// The failures below log on purpose; keep them out of the test output (and inspect them).
beforeEach(() => captureConsole());
afterEach(() => vi.restoreAllMocks());

describe.each<keyof typeof MODES>(["prepare-throws", "statement-rejects"])(
  "D1 failing (%s) → 503 service_unavailable",
  (label) => {
    const broken = () => brokenDb({ mode: MODES[label] });

    it.each([
      ["listPets", "/v1/pets", {}],
      [
        "createPet",
        "/v1/pets",
        {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ name: "x", categoryId: 1 }),
        },
      ],
      ["getPet", "/v1/pets/1", {}],
    ] as Array<[string, string, RequestInit]>)(
      "on %s for a key that is already known",
      async (_op, path, init) => {
        const { key } = await issueKey();
        // Warm the isolate's key cache through the real binding, so the failure hits the handler.
        expect((await call("/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
        const headers = { ...auth(key), ...(init.headers as Record<string, string> | undefined) };
        await expect503(await callWith({ DB: broken() }, path, { ...init, headers }));
      },
    );

    it("while authenticating a key not seen yet (not a 401)", async () => {
      const { key } = await issueKey();
      await expect503(await callWith({ DB: broken() }, "/v1/pets", { headers: auth(key) }));
    });

    it("on the admin API", async () => {
      const DB = broken();
      await expect503(
        await callWith({ DB }, "/admin/v1/keys", {
          method: "POST",
          headers: { ...ADMIN, "Content-Type": "application/json" },
          body: JSON.stringify({ name: "x", plan: "pro" }),
        }),
      );
      await expect503(await callWith({ DB }, "/admin/v1/keys", { headers: ADMIN }));
      await expect503(
        await callWith({ DB }, "/admin/v1/keys/key_AAAAAAAAAAAAAAAAAAAA", { headers: ADMIN }),
      );
    });

    it("logs the cause server-side", async () => {
      const { key } = await issueKey();
      expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
      consoleLines = [];
      const res = await callWith({ DB: broken() }, "/v1/pets/1", { headers: auth(key) });
      expect(res.status).toBe(503);
      expect(consoleLines.some((l) => l.includes("Network connection lost"))).toBe(true);
    });

    it("nothing is lost: the real database still answers afterwards", async () => {
      const { key } = await issueKey();
      await callWith({ DB: broken() }, "/v1/pets", { headers: auth(key) });
      expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    });
  },
);

describe("an unexpected exception → 500 internal_error", () => {
  const SECRET_DETAIL = "D1_ERROR: CHECK constraint failed: secretThing (SQLITE_CONSTRAINT)";

  /**
   * A D1 binding whose queries break a constraint: input that validation should have refused,
   * i.e. a bug of ours rather than an outage, so 500 and not a retryable 503.
   */
  function explodingDb(): D1Database {
    const fail = () => {
      throw new Error(SECRET_DETAIL);
    };
    return {
      prepare: env.DB.prepare.bind(env.DB),
      batch: env.DB.batch.bind(env.DB),
      withSession: () => ({ prepare: fail, batch: fail, getBookmark: () => null }),
    } as unknown as D1Database;
  }

  it("has an Error body without stack or details, and one log line with them", async () => {
    const { key } = await issueKey();
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    consoleLines = [];
    const res = await callWith({ DB: explodingDb() }, "/v1/pets", { headers: auth(key) });
    const text = await res.clone().text();
    expect(text).not.toContain("secretThing");
    expect(text).not.toContain("TypeError");
    expect(text).not.toMatch(/\bat .+:\d+/);
    expect(res.headers.get("Retry-After")).toBeNull();
    await expectError(res, 500, "internal_error");
    const withDetails = consoleLines.filter((l) => l.includes("secretThing"));
    expect(withDetails).toHaveLength(1);
    expect(withDetails[0]).not.toContain(key);
  });

  it("the service keeps answering normally afterwards", async () => {
    const { key } = await issueKey();
    await callWith({ DB: explodingDb() }, "/v1/pets", { headers: auth(key) });
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
  });
});
