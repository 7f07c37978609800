import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import { ADMIN, auth, BASE, call, expectError, issueKey } from "./helpers";

// What a failing D1 might say: SQL and internals that must never reach the client.
const LEAKY = "D1_ERROR: Network connection lost while running SELECT key_hash FROM api_keys WHERE secret = 'x'";
const LEAKS = ["SELECT", "api_keys", "key_hash", "D1_ERROR", "Network connection lost", "    at "];

type Mode = "prepare-throws" | "statement-rejects";

/** A D1 binding (and session) that fails the way `mode` says; anything else about it works. */
function brokenDb(mode: Mode): D1Database {
  const fail = () => {
    throw new Error(LEAKY);
  };
  const statement = {
    bind: () => statement,
    first: () => Promise.reject(new Error(LEAKY)),
    all: () => Promise.reject(new Error(LEAKY)),
    run: () => Promise.reject(new Error(LEAKY)),
    raw: () => Promise.reject(new Error(LEAKY)),
  };
  const db = {
    prepare: mode === "prepare-throws" ? fail : () => statement,
    batch: () => Promise.reject(new Error(LEAKY)),
    exec: () => Promise.reject(new Error(LEAKY)),
    dump: () => Promise.reject(new Error(LEAKY)),
    withSession: () => ({ prepare: db.prepare, batch: db.batch, getBookmark: () => null }),
  };
  return db as unknown as D1Database;
}

function send(path: string, init: RequestInit, bindings: Partial<Env>): Promise<Response> {
  return Promise.resolve(createApp().fetch(new Request(`${BASE}${path}`, init), { ...env, ...bindings }, createExecutionContext()));
}

async function expectNoLeak(res: Response) {
  const text = await res.clone().text();
  for (const leak of LEAKS) expect(text).not.toContain(leak);
}

let consoleLines: string[] = [];
function captureConsole() {
  consoleLines = [];
  const capture = (...args: unknown[]) => void consoleLines.push(args.map(String).join(" "));
  for (const level of ["log", "warn", "error"] as const) vi.spyOn(console, level).mockImplementation(capture);
}

// The failures below log on purpose; keep them out of the test output (and inspect them).
beforeEach(() => captureConsole());
afterEach(() => vi.restoreAllMocks());

describe.each<Mode>(["prepare-throws", "statement-rejects"])("D1 failing (%s) → 503 service_unavailable", (mode) => {
  async function expect503(res: Response) {
    expect(`${res.status} ${await res.clone().text()}`).toMatch(/^503 /);
    const retry = res.headers.get("Retry-After");
    expect(retry).toMatch(/^[1-9][0-9]*$/);
    await expectNoLeak(res);
    await expectError(res, 503, "service_unavailable");
  }

  it.each([
    ["listPets", "/v1/pets", {}],
    ["createPet", "/v1/pets", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: "x", categoryId: 1 }) }],
    ["getPet", "/v1/pets/1", {}],
  ] as Array<[string, string, RequestInit]>)("on %s for a key that is already known", async (_op, path, init) => {
    const { key } = await issueKey();
    // Warm the isolate's key cache through the real binding, so the failure hits the handler.
    expect((await call("/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
    const headers = { ...auth(key), ...(init.headers as Record<string, string> | undefined) };
    await expect503(await send(path, { ...init, headers }, { DB: brokenDb(mode) }));
  });

  it("while authenticating a key not seen yet (not a 401)", async () => {
    const { key } = await issueKey();
    await expect503(await send("/v1/pets", { headers: auth(key) }, { DB: brokenDb(mode) }));
  });

  it("on the admin API", async () => {
    const DB = brokenDb(mode);
    await expect503(await send("/admin/v1/keys", { method: "POST", headers: { ...ADMIN, "Content-Type": "application/json" }, body: JSON.stringify({ name: "x", plan: "pro" }) }, { DB }));
    await expect503(await send("/admin/v1/keys", { headers: ADMIN }, { DB }));
    await expect503(await send("/admin/v1/keys/key_AAAAAAAAAAAAAAAAAAAA", { headers: ADMIN }, { DB }));
  });

  it("logs the cause server-side", async () => {
    const { key } = await issueKey();
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
    consoleLines = [];
    const res = await send("/v1/pets/1", { headers: auth(key) }, { DB: brokenDb(mode) });
    expect(res.status).toBe(503);
    expect(consoleLines.some((l) => l.includes("Network connection lost"))).toBe(true);
  });

  it("nothing is lost: the real database still answers afterwards", async () => {
    const { key } = await issueKey();
    await send("/v1/pets", { headers: auth(key) }, { DB: brokenDb(mode) });
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
  });
});

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
    const res = await send("/v1/pets", { headers: auth(key) }, { DB: explodingDb() });
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
    await send("/v1/pets", { headers: auth(key) }, { DB: explodingDb() });
    expect((await call("/v1/pets", { headers: auth(key) })).status).toBe(200);
  });
});
