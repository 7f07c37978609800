import { describe, expect, it } from "vitest";
import { parseAuthorization } from "../src/auth/authorization-header";
import { ADMIN, auth, call, expectError, issueKey } from "./helpers";

let ip = 0;
const fromNewClient = (headers: Record<string, string> = {}) => ({
  "CF-Connecting-IP": `192.0.2.${++ip}`,
  ...headers,
});
const KEY_SHAPED = `pet_test_${"C".repeat(43)}`;

describe("parseAuthorization", () => {
  it("reads Bearer tokens: scheme case-insensitive, one or more spaces, trailing spaces", () => {
    for (const header of [`Bearer ${KEY_SHAPED}`, `bearer ${KEY_SHAPED}`, `BEARER  ${KEY_SHAPED} `])
      expect(parseAuthorization(header)).toEqual({ kind: "bearer", token: KEY_SHAPED });
    expect(parseAuthorization("Bearer abc+/=")).toEqual({ kind: "bearer", token: "abc+/=" });
  });

  it("tells no header, another scheme and each malformation apart", () => {
    expect(parseAuthorization(undefined)).toEqual({ kind: "none" });
    expect(parseAuthorization("Basic dTpw")).toEqual({ kind: "other-scheme", scheme: "Basic" });
    expect(parseAuthorization("x".repeat(50))).toEqual({ kind: "other-scheme", scheme: null });
    const problems: Array<[string, RegExp]> = [
      ["", /empty/],
      ["   ", /empty/],
      ["Bearer", /no token/],
      ["Bearer    ", /no token/],
      [`Bearer\t${KEY_SHAPED}`, /tab/],
      [`Bearer \t${KEY_SHAPED}`, /tab/],
      [`Bearer ${KEY_SHAPED}, Bearer ${KEY_SHAPED}`, /more than one credential/],
      [`Bearer a, Basic b`, /more than one credential/],
      ["Bearer a b", /single word/],
      ['Bearer "quoted"', /b64token/],
      ["Bearer to=ken", /b64token/],
      [KEY_SHAPED, /without the Bearer scheme/],
    ];
    for (const [header, problem] of problems) {
      const parsed = parseAuthorization(header);
      expect(parsed.kind, JSON.stringify(header)).toBe("malformed");
      expect(parsed.kind === "malformed" && parsed.problem, JSON.stringify(header)).toMatch(
        problem,
      );
    }
  });
});

describe("a malformed Authorization header says what was wrong (RFC 6750 §3.1)", () => {
  const MALFORMED: Array<[string, RegExp]> = [
    ["Bearer", /Bearer is followed by no token/],
    [`Bearer\t${KEY_SHAPED}`, /not a tab/],
    [KEY_SHAPED, /without the Bearer scheme/],
  ];
  for (const [header, problem] of MALFORMED) {
    it(`${JSON.stringify(header.slice(0, 20))}… → 400 invalid_request, error="invalid_request"`, async () => {
      const res = await call("/v1/pets", { headers: fromNewClient({ Authorization: header }) });
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toMatch(problem);
      expect(res.headers.get("WWW-Authenticate")).toMatch(
        /^Bearer realm="animal-store", error="invalid_request", error_description="[^"\\]+"$/,
      );
    });
  }

  it("two Authorization headers → 400 invalid_request naming the duplicate", async () => {
    const { key } = await issueKey();
    const headers = new Headers(fromNewClient());
    headers.append("Authorization", `Bearer ${key}`);
    headers.append("Authorization", `Bearer ${key}`);
    const res = await call("/v1/pets", { headers });
    expect((await expectError(res, 400, "invalid_request")).message).toMatch(
      /more than one credential/,
    );
    expect(res.headers.get("WWW-Authenticate")).toMatch(/error="invalid_request"/);
  });

  it("another scheme → 401 naming it, with a bare challenge (no error code: the client may not know Bearer)", async () => {
    const res = await call("/v1/pets", { headers: fromNewClient({ Authorization: "Basic dTpw" }) });
    const body = await expectError(res, 401, "unauthorized");
    expect(body.message).toMatch(/uses the Basic scheme; send Authorization: Bearer <API key>/);
    expect(res.headers.get("WWW-Authenticate")).toBe('Bearer realm="animal-store"');
  });

  it("no header → 401 'Missing API key' with a bare challenge", async () => {
    const res = await call("/v1/pets", { headers: fromNewClient() });
    expect((await expectError(res, 401, "unauthorized")).message).toMatch(/^Missing API key/);
    expect(res.headers.get("WWW-Authenticate")).toBe('Bearer realm="animal-store"');
  });

  it('a well-formed token that matches no key → 401 with error="invalid_token"', async () => {
    const res = await call("/v1/pets", { headers: fromNewClient(auth(KEY_SHAPED)) });
    expect((await expectError(res, 401, "unauthorized")).message).toBe("The API key is not valid.");
    expect(res.headers.get("WWW-Authenticate")).toBe(
      'Bearer realm="animal-store", error="invalid_token"',
    );
  });

  it("the operator API answers the same way, in its own realm", async () => {
    const tab = await call("/admin/v1/keys", {
      headers: fromNewClient({ Authorization: `Bearer\t${ADMIN.Authorization.slice(7)}` }),
    });
    expect((await expectError(tab, 400, "invalid_request")).message).toMatch(/not a tab/);
    expect(tab.headers.get("WWW-Authenticate")).toMatch(
      /^Bearer realm="animal-store-admin", error="invalid_request"/,
    );
    const basic = await call("/admin/v1/keys", {
      headers: fromNewClient({ Authorization: "Basic dTpw" }),
    });
    expect((await expectError(basic, 401, "unauthorized")).message).toMatch(/ADMIN_TOKEN/);
    expect(basic.headers.get("WWW-Authenticate")).toBe('Bearer realm="animal-store-admin"');
    const wrong = await call("/admin/v1/keys", {
      headers: fromNewClient({ Authorization: "Bearer wrong" }),
    });
    await expectError(wrong, 401, "unauthorized");
    expect(wrong.headers.get("WWW-Authenticate")).toBe(
      'Bearer realm="animal-store-admin", error="invalid_token"',
    );
  });
});
