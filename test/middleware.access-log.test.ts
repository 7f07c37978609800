import { afterEach, describe, expect, it, vi } from "vitest";
import { auth, call, callWith, issueKey, postJson } from "./helpers";

afterEach(() => vi.restoreAllMocks());

describe("access log", () => {
  it("exactly one JSON line per request, with the fields and never the key", async () => {
    const k = await issueKey();
    const secretPart = k.key.slice(k.key.lastIndexOf("_") + 1);
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    vi.spyOn(console, "warn").mockImplementation(() => undefined); // the outage's warnings
    const unleased = await issueKey(); // no lease in this isolate: its request asks the object
    const unreachable = {
      getByName: () => ({ admit: () => Promise.reject(new Error("limiter down")) }),
    };
    const cases: Array<[string, () => Promise<Response>, Record<string, unknown>]> = [
      [
        "GET /v1/pets",
        () => call("/v1/pets", { headers: auth(k.key) }),
        {
          method: "GET",
          route: "/v1/pets",
          status: 200,
          keyId: k.id,
          plan: k.plan,
          quota: "allowed",
        },
      ],
      [
        "POST /v1/pets",
        () => postJson("/v1/pets", { name: "Logged", categoryId: 1 }, auth(k.key)),
        {
          method: "POST",
          route: "/v1/pets",
          status: 201,
          keyId: k.id,
          plan: k.plan,
          quota: "allowed",
        },
      ],
      [
        "400",
        () => call("/v1/pets?limit=0", { headers: auth(k.key) }),
        { method: "GET", status: 400, keyId: k.id, plan: k.plan, quota: "allowed" },
      ],
      [
        "401",
        () => call("/v1/pets", { headers: { Authorization: `Bearer ${k.key}x` } }),
        { method: "GET", status: 401 },
      ],
      [
        "limiter unreachable (let through on the fallback allowance)",
        () => callWith({ QUOTA: unreachable }, "/v1/pets", { headers: auth(unleased.key) }),
        { method: "GET", status: 200, keyId: unleased.id, quota: "unavailable" },
      ],
    ];
    for (const [label, send, expected] of cases) {
      log.mockClear();
      const res = await send();
      const lines = log.mock.calls.map((args) => args.map(String).join(" "));
      expect(lines, label).toHaveLength(1);
      const line = lines[0]!;
      expect(line).not.toContain(k.key);
      expect(line).not.toContain(secretPart);
      const entry = JSON.parse(line) as Record<string, unknown>;
      expect(entry).toMatchObject({ requestId: res.headers.get("X-Request-Id"), ...expected });
      expect(entry.status).toBe(res.status);
      expect(typeof entry.route).toBe("string");
      expect(entry.durationMs).toEqual(expect.any(Number));
      expect(entry.durationMs as number).toBeGreaterThanOrEqual(0);
    }
  });

  it("ACCESS_LOG=off writes no line", async () => {
    const k = await issueKey();
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    const res = await callWith({ ACCESS_LOG: "off" }, "/v1/pets", { headers: auth(k.key) });
    expect(res.status).toBe(200);
    expect(log).not.toHaveBeenCalled();
  });
});
