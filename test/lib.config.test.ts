import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ConfigError,
  configOrThrow,
  keyTagSecretsAccepted,
  secretOrThrow,
} from "../src/lib/config";
import { ADMIN, auth, callWith, expectError, issueKey } from "./helpers";

afterEach(() => vi.restoreAllMocks());

describe("configOrThrow", () => {
  it("parses the test environment's settings into typed values", () => {
    const config = configOrThrow(env);
    expect(config).toMatchObject({ ENVIRONMENT: "local", BAN_MINUTES: 15, ACCESS_LOG: "on" });
    expect(config.CORS_ORIGINS).toEqual([]);
  });

  it("splits CORS_ORIGINS and applies defaults", () => {
    const config = configOrThrow({
      ...env,
      CORS_ORIGINS: " https://a.example , http://localhost:5173 ",
      BAN_MINUTES: undefined as unknown as string,
      ACCESS_LOG: undefined as unknown as string,
    });
    expect(config.CORS_ORIGINS).toEqual(["https://a.example", "http://localhost:5173"]);
    expect([config.BAN_MINUTES, config.ACCESS_LOG]).toEqual([15, "on"]);
  });

  it.each([
    ["BAN_MINUTES", "abc"],
    ["BAN_MINUTES", "0"],
    ["ACCESS_LOG", "yes"],
    ["ENVIRONMENT", "prod"],
    ["CORS_ORIGINS", "example.com"],
    ["CORS_ORIGINS", "https://a.example/path"],
    ["PUBLIC_ORIGIN", "api.example.com"],
    ["PUBLIC_ORIGIN", "https://api.example.com/v1"],
    ["KEY_TAG_SECRET", "shorter-than-32-characters"],
    ["KEY_TAG_SECRET_PREVIOUS", "shorter-than-32-characters"],
    ["WEBHOOK_ENCRYPTION_KEY", "not-base64-of-32-bytes"],
    ["WEBHOOK_ENCRYPTION_KEY", "c2hvcnQ="],
    // 33 bytes, base64 of the right look but one byte too many
    ["WEBHOOK_ENCRYPTION_KEY_PREVIOUS", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYw"],
    ["WEBHOOK_LOCAL_RECEIVERS", "yes"],
    ["WEBHOOK_RETRY_DELAYS", "1,2"],
    ["WEBHOOK_RETRY_DELAYS", "1,1,1,1,1,1,x"],
    ["WEBHOOK_RETRY_DELAYS", "1,1,1,1,1,1,50000"],
  ])("%s=%j is refused with a ConfigError naming it", (name, value) => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    expect(() => configOrThrow({ ...env, [name]: value })).toThrow(ConfigError);
    expect(() => configOrThrow({ ...env, [name]: value })).toThrow(name);
  });

  it("webhook settings: local receivers and another retry schedule only where ENVIRONMENT is local", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const fast = "1,1,1,1,1,1,1";
    expect(configOrThrow({ ...env, WEBHOOK_RETRY_DELAYS: fast }).WEBHOOK_RETRY_DELAYS).toEqual([
      1, 1, 1, 1, 1, 1, 1,
    ]);
    expect(configOrThrow({ ...env, WEBHOOK_RETRY_DELAYS: "" }).WEBHOOK_RETRY_DELAYS).toEqual([
      5, 300, 1800, 7200, 18_000, 36_000, 36_000,
    ]);
    const staging = { ...env, ENVIRONMENT: "staging" };
    expect(configOrThrow(staging).WEBHOOK_LOCAL_RECEIVERS).toBe("off");
    expect(() => configOrThrow({ ...staging, WEBHOOK_RETRY_DELAYS: fast })).toThrow(
      "WEBHOOK_RETRY_DELAYS",
    );
    expect(() => configOrThrow({ ...staging, WEBHOOK_LOCAL_RECEIVERS: "on" })).toThrow(
      "WEBHOOK_LOCAL_RECEIVERS",
    );
  });

  it("an empty secret is an unset one, and secretOrThrow says which", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const config = configOrThrow({ ...env, CURSOR_SECRET: "" });
    expect(config.CURSOR_SECRET).toBeUndefined();
    expect(() => secretOrThrow(config, "CURSOR_SECRET")).toThrow(/CURSOR_SECRET is not set/);
    // On a running Worker a secret is set in a new version (not `secret put`, which deploys the
    // latest version to all traffic at once and refuses during a gradual deployment).
    expect(() => secretOrThrow(config, "CURSOR_SECRET")).toThrow(
      /run `wrangler versions secret put CURSOR_SECRET --env …` and deploy that version/,
    );
  });

  it("keyTagSecretsAccepted: KEY_TAG_SECRET, then the previous one during a rotation; none when unset", () => {
    const current = "a-key-tag-secret-of-32-characters!";
    const previous = "the-key-tag-secret-before-it-0123";
    expect(keyTagSecretsAccepted(configOrThrow({ ...env, KEY_TAG_SECRET: current }))).toEqual([
      current,
    ]);
    const rotating = { ...env, KEY_TAG_SECRET: current, KEY_TAG_SECRET_PREVIOUS: previous };
    expect(keyTagSecretsAccepted(configOrThrow(rotating))).toEqual([current, previous]);
    const unset = { ...env, KEY_TAG_SECRET: "", KEY_TAG_SECRET_PREVIOUS: previous };
    expect(keyTagSecretsAccepted(configOrThrow(unset))).toEqual([]);
  });
});

describe("a misconfigured deployment", () => {
  it("answers every request 500 with an Error body, and logs the setting once per isolate", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { key } = await issueKey();
    const broken = { ...env, BAN_MINUTES: "1441" }; // a problem no other test meets
    for (const path of ["/v1/pets", "/v1/openapi.json", "/admin/v1/keys", "/nowhere"]) {
      const res = await callWith(broken, path, { headers: auth(key) });
      const body = await expectError(res, 500, "internal_error");
      expect(body.message).toMatch(/misconfigured/);
      expect(body.message).not.toContain("1441");
    }
    const lines = error.mock.calls.map((args) => String(args[0]));
    expect(lines.filter((l) => l.includes("BAN_MINUTES"))).toHaveLength(1);
  });

  it("without ADMIN_TOKEN and ADMIN_TOKENS the admin API answers 500 and the public API keeps working", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { key } = await issueKey();
    const noTokens = { ADMIN_TOKEN: "", ADMIN_TOKENS: "" };
    const res = await callWith(noTokens, "/admin/v1/keys", { headers: ADMIN });
    await expectError(res, 500, "internal_error");
    expect(
      error.mock.calls.some(([line]) =>
        String(line).includes(
          "neither ADMIN_TOKEN nor ADMIN_TOKENS is set: run `wrangler versions secret put ADMIN_TOKENS",
        ),
      ),
    ).toBe(true);
    const pets = await callWith(noTokens, "/v1/pets", { headers: auth(key) });
    expect(pets.status).toBe(200);
  });
});
