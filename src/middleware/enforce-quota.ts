import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { wrapTime } from "hono/timing";
import {
  type ApiKeyVariables,
  KEY_PROBLEMS,
  reauthenticateOrThrow,
  unusableKeyError,
  whyKeyUnusable,
} from "../auth/api-key";
import { forgetKey } from "../auth/key-cache";
import { getKey, policyOf } from "../db/keys";
import { runAfterResponse } from "../lib/after-response";
import { clock } from "../lib/clock";
import { unavailable } from "../lib/errors";
import { ExpiringMap } from "../lib/expiring-map";
import type { EnvWith } from "../lib/hono-env";
import type { RouteTable } from "../lib/route-table";
import { type AdmitResult, locationOf } from "../objects/quota-holder-client";
import { QuotaLimiterClient } from "../objects/quota-limiter-client";
import { answerWithoutObject, rereadKeyProblem } from "../quota/fail-open";
import { rateLimitHeaders, refusalError } from "../quota/headers";
import { newAdmissionId } from "../quota/lease-messages";
import type { Outcome } from "../quota/windows";
import { BOOKMARK_HEADER } from "./d1-session";
import { markFirstUseOrThrow } from "./first-use";

/** Set by `enforceQuota`, for the access log (see quota/fail-open.ts for the last two). */
export type QuotaVariables = { quota: Outcome | "overloaded" | "unavailable" };

type QuotaEnv = EnvWith<ApiKeyVariables & QuotaVariables>;

// Headers a read's handler adds to its answer (see routes/pets and middleware/d1-session.ts).
const READ_ANSWER_HEADERS = ["ETag", "Link", BOOKMARK_HEADER];

// Keys whose last decision in this isolate left room: their reads run alongside the limiter call.
const keysWithRoom = new ExpiringMap<string, true>(10_000);

const rereadKeyProblemInD1 = (env: Env, keyId: string): Promise<string | null> =>
  rereadKeyProblem(keyId, async (now) => whyKeyUnusable(await getKey(env.DB, keyId), now));

/** Throws the answer for a refused request; returns the rate-limit headers of an admitted one. */
async function headersOrThrowRefusal(
  c: Context<QuotaEnv>,
  result: AdmitResult,
): Promise<Record<string, string>> {
  const key = c.get("apiKey");
  const room =
    result.reached &&
    result.decision.outcome === "allowed" &&
    result.decision.windows.every((w) => w.remaining > 0);
  if (room) keysWithRoom.set(key.id, true, Infinity);
  else keysWithRoom.delete(key.id);
  if (!result.reached) {
    const answer = answerWithoutObject(key.id, key.limits, result, clock.now());
    c.set("quota", answer.quota);
    if (!answer.admitted) throw answer.error;
    const problem = await rereadKeyProblemInD1(c.env, key.id);
    if (problem) {
      forgetKey(key.id);
      throw unusableKeyError(problem);
    }
    return answer.headers;
  }
  c.set("quota", result.decision.outcome);
  const { decision } = result;
  // A newer policy than this isolate's cached record: the next request reads the key again.
  if (decision.outcome === "revoked" || decision.policyVersion > key.version) forgetKey(key.id);
  if (decision.outcome === "revoked") {
    // The object refuses revoked and disabled keys alike; D1 says which (a rare read).
    const problem = await rereadKeyProblemInD1(c.env, key.id).catch(() => null);
    throw unusableKeyError(problem ?? KEY_PROBLEMS.revoked);
  }
  if (decision.outcome === "stale") throw staleAgain();
  const headers = rateLimitHeaders(decision);
  if (decision.outcome !== "allowed") throw refusalError(decision.outcome, headers);
  return headers;
}

/** How many times a request's copy of the key is read again when `stale`, before a 503. */
export const MOST_REREADS = 2;

const staleAgain = () =>
  unavailable("The API key changed while this request was decided; repeat the request.");

/** The request decided (in its location already, or now); a stale copy is read again, same id. */
async function decidedOrThrow(
  c: Context<QuotaEnv>,
  admissionId: string,
  decidedInLocation: AdmitResult | undefined,
): Promise<AdmitResult> {
  const decideNow = () =>
    new QuotaLimiterClient(c.env.QUOTA, c.get("apiKey"), () =>
      locationOf(c.req.raw, c.env.QUOTA_HOLDER),
    ).admit(policyOf(c.get("apiKey")), admissionId);
  let result = await (decidedInLocation ?? decideNow());
  for (let reread = 0; result.reached && result.decision.outcome === "stale"; reread++) {
    if (reread === MOST_REREADS) throw staleAgain();
    await reauthenticateOrThrow(c);
    result = await decideNow();
  }
  return result;
}

/**
 * Every /v1 request is decided before it is answered (docs/quotas.md). Reads by a key with room
 * left run alongside the decision (a read changes nothing); a refused read's work is discarded.
 */
export const enforceQuota = ({ routes }: { routes: RouteTable }) =>
  createMiddleware<QuotaEnv>(async (c, next) => {
    const key = c.get("apiKey");
    const firstUse = markFirstUseOrThrow(c.env, key);
    // Decided already when the key's location holder authenticated the request (auth/api-key.ts).
    const decision = decidedOrThrow(
      c,
      c.get("admissionId") ?? newAdmissionId(clock.now()),
      c.get("admission"),
    );
    const admitted = wrapTime(
      c,
      "quota",
      Promise.all([decision, firstUse]).then(([result]) => {
        if (result.reached && result.afterResponse) runAfterResponse(c, result.afterResponse);
        return result;
      }),
    );
    const isRead = routes.effectOf(c.req.method, c.req.path) === "read";
    if (!(isRead && keysWithRoom.get(key.id, 0))) {
      const headers = await headersOrThrowRefusal(c, await admitted);
      for (const [name, value] of Object.entries(headers)) c.header(name, value);
      return next();
    }
    await next();
    const headers = await admitted
      .then((result) => headersOrThrowRefusal(c, result))
      .catch((refusal: unknown) => {
        // The refusal replaces the read's answer: drop what describes that answer, keep the rest.
        for (const name of READ_ANSWER_HEADERS) c.res.headers.delete(name);
        throw refusal;
      });
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  });
