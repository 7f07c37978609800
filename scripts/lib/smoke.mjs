// @ts-check
// The smoke test of a running environment (`npm run smoke`, and the deploy script between its
// rollout steps): a handful of requests an operator would make by hand after a deploy. It uses a
// key of its own, found by name and reused (scripts/lib/service-key.mjs): enabled with a fresh
// secret at the start, disabled again at the end, whatever happened. So any number of runs leave
// one disabled key, not one revoked key per run.
import { disableServiceKeyOrThrow, serviceKeyOrThrow } from "./service-key.mjs";

const TIMEOUT_MS = 10_000;
const RATE_LIMIT_HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"];
/** The key `npm run smoke` uses. */
export const SMOKE_KEY_NAME = "smoke-test";

/** A check that failed: `check` names it, `message` says what was seen instead. */
export class SmokeFailure extends Error {
  /** @param {string} check @param {string} message */
  constructor(check, message) {
    super(`${check}: ${message}`);
    this.check = check;
  }
}

/**
 * The body of `res` as JSON, or null when it is not JSON.
 * @param {Response} res
 * @returns {Promise<any>}
 */
const jsonOrNull = (res) => res.json().catch(() => null);

/**
 * Runs every check against `url`; resolves with the names of the checks passed, or rejects with
 * a SmokeFailure naming the first that failed (a URL that does not answer fails the first).
 * `headers` go with every request (the deploy pins the new version with one). `keyName` names the
 * key it reuses: two runs at once with the same name would disable each other's key, so the deploy
 * uses a name of its own and a smoke test by hand never fails a deploy's bake.
 * @param {{ url: string, adminToken: string, headers?: Record<string, string>,
 *   keyName?: string, log?: (line: string) => void }} options
 */
export async function runSmokeOrThrow({
  url,
  adminToken,
  headers = {},
  keyName = SMOKE_KEY_NAME,
  log = () => {},
}) {
  const base = url.replace(/\/+$/, "");
  /** @type {string[]} */
  const passed = [];

  /** @param {string} check @param {string} path @param {RequestInit & { headers?: Record<string, string> }} init */
  async function request(check, path, init = {}) {
    try {
      return await fetch(`${base}${path}`, {
        ...init,
        headers: { ...headers, ...init.headers },
        redirect: "manual",
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (err) {
      const cause = /** @type {{ cause?: { code?: string } }} */ (err).cause?.code ?? String(err);
      throw new SmokeFailure(check, `${base}${path} did not answer (${cause})`);
    }
  }
  /** @param {string} check @param {Response} res @param {number} status */
  async function expectStatus(check, res, status) {
    if (res.status !== status)
      throw new SmokeFailure(
        check,
        `expected ${status}, got ${res.status}: ${(await res.text()).slice(0, 300)}`,
      );
  }
  /** @param {string} check */
  const pass = (check) => {
    passed.push(check);
    log(`✓ ${check}`);
  };
  const admin = { Authorization: `Bearer ${adminToken}` };

  let check = "OpenAPI document";
  const doc = await request(check, "/v1/openapi.json");
  await expectStatus(check, doc, 200);
  const body = await jsonOrNull(doc);
  if (!body?.openapi?.startsWith("3.") || !body.paths?.["/pets"])
    throw new SmokeFailure(check, "GET /v1/openapi.json is not the API's OpenAPI document");
  pass(check);

  check = "enable the smoke key";
  /** @type {import("./service-key.mjs").AdminRequest} */
  const adminRequest = (path, init = {}) =>
    request(check, path, {
      ...init,
      headers: { ...admin, ...(init.body ? { "Content-Type": "application/json" } : {}) },
    });
  /** @type {{ id: string, key: string }} */
  let key;
  try {
    key = await serviceKeyOrThrow(adminRequest, keyName);
  } catch (err) {
    if (err instanceof SmokeFailure) throw err;
    throw new SmokeFailure(
      check,
      `${keyName}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  pass(check);

  /** @type {unknown} */
  let failure;
  try {
    check = "authenticated list";
    const list = await request(check, "/v1/pets?limit=1", {
      headers: { Authorization: `Bearer ${key.key}` },
    });
    await expectStatus(check, list, 200);
    const page = await jsonOrNull(list);
    if (!Array.isArray(page))
      throw new SmokeFailure(check, "GET /v1/pets answered 200 without an array of pets");
    pass(check);

    check = "rate-limit headers";
    const missing = RATE_LIMIT_HEADERS.filter((name) => !list.headers.has(name));
    if (missing.length)
      throw new SmokeFailure(check, `GET /v1/pets answered without ${missing.join(", ")}`);
    pass(check);

    check = "401 without a key";
    const anonymous = await request(check, "/v1/pets?limit=1");
    await expectStatus(check, anonymous, 401);
    const error = await jsonOrNull(anonymous);
    if (error?.code !== "unauthorized")
      throw new SmokeFailure(check, `the 401's body is not {code: "unauthorized", …}`);
    pass(check);

    check = "/docs";
    const docs = await request(check, "/docs");
    await expectStatus(check, docs, 200);
    if (!docs.headers.get("Content-Type")?.startsWith("text/html"))
      throw new SmokeFailure(check, `GET /docs is ${docs.headers.get("Content-Type")}, not HTML`);
    await docs.arrayBuffer();
    pass(check);
  } catch (err) {
    failure = err;
  }
  // Disabled whatever happened above, so the key answers 401 between runs.
  check = "disable the smoke key";
  try {
    await disableServiceKeyOrThrow(adminRequest, key.id);
    pass(check);
  } catch (err) {
    const disableFailure =
      err instanceof SmokeFailure
        ? err
        : new SmokeFailure(check, err instanceof Error ? err.message : String(err));
    // The first failure is the one reported; this one is still shown.
    if (failure) log(`✗ ${disableFailure.message}`);
    else failure = disableFailure;
  }
  if (failure) throw failure;
  return passed;
}
