// @ts-check
// The limiter microbenchmark: how many decisions a second one key's QuotaLimiter makes under
// load, admitting and refusing.
import { issueKey } from "../../scripts/lib/local-server.mjs";
import { cannon, summarizeRun } from "./load.mjs";
import { UNLIMITED } from "./workers.mjs";

/**
 * @param {{ url: string, adminToken: string }} api
 * @param {{ connections: number, seconds: number }} load
 */
export async function limiterBench(api, { connections, seconds }) {
  // Admitted decisions: an unknown /v1 path needs a key and passes the quota check like every
  // /v1 request, then answers 404 without touching D1, so the rate is bound by auth (a warm
  // cache) and the one RPC to the key's QuotaLimiter, which counts and persists each decision.
  const admitKey = await issueKey(api, {
    name: "bench-limiter-admit",
    plan: "enterprise",
    limits: UNLIMITED,
  });
  const admitted = summarizeRun(
    await cannon({
      url: api.url,
      requests: [{ method: "GET", path: "/v1/limiter-probe" }],
      connections,
      seconds,
      headers: { Authorization: `Bearer ${admitKey.key}` },
    }),
  );
  const usageResponse = await fetch(`${api.url}/admin/v1/keys/${admitKey.id}`, {
    headers: { Authorization: `Bearer ${api.adminToken}` },
  });
  const usage = /** @type {{ usage?: { day?: { count: number } } }} */ (await usageResponse.json());

  // Refused decisions: a key allowed 1 request a day; everything after the first is a 429
  // (quota_exceeded, then key_banned), so the rate is the limiter's refusal path.
  const refuseKey = await issueKey(api, {
    name: "bench-limiter-refuse",
    plan: "enterprise",
    limits: { perMinute: 1, perDay: 1 },
  });
  const refused = summarizeRun(
    await cannon({
      url: api.url,
      requests: [{ method: "GET", path: "/v1/pets?limit=1" }],
      connections,
      seconds,
      headers: { Authorization: `Bearer ${refuseKey.key}` },
    }),
  );
  return { admitted, refused, doCount: usage?.usage?.day?.count ?? null };
}
