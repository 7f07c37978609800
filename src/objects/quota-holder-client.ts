import type { KeyMatch } from "../db/keys";
import { logFailure } from "../lib/log";
import type { NoDecision } from "../quota/fail-open";
import type { Admission, LeaseRequest } from "../quota/lease-messages";
import type { KeyDecision, Policy } from "../quota/windows";
import type { Region } from "../schemas/region";
import {
  type HolderAnswer,
  type HolderAuthentication,
  holderName,
  type QuotaHolder,
} from "./quota-holder";
import { callWithOneRetry } from "./stub-call";

/** The decision, or why there is none (NoDecision). */
export type AdmitResult =
  | {
      reached: true;
      decision: KeyDecision;
      /** Work on this isolate's lease to run after the response (`waitUntil`; see `upkeep`). */
      afterResponse: Promise<void> | null;
    }
  | ({ reached: false } & NoDecision);

/** Where a request arrived: its location's holders and its name (`request.cf.colo`). */
export type RequestLocation = { holders: DurableObjectNamespace<QuotaHolder>; name: string };

/** Where `request` arrived, or null when it does not say. */
export function locationOf(
  request: Request,
  holders: DurableObjectNamespace<QuotaHolder>,
): RequestLocation | null {
  const colo = (request.cf as { colo?: unknown } | undefined)?.colo;
  return typeof colo === "string" && colo !== "" ? { holders, name: colo } : null;
}

/** HolderAuthentication as the Worker uses it; "unread" also when the holder was not reached. */
export type LocationAuthentication =
  | { outcome: "found"; match: KeyMatch; admission: AdmitResult | null; copyAgeMs: number }
  | { outcome: "unknown" }
  | { outcome: "unread" };

function holderIn(location: RequestLocation, keyId: string): DurableObjectStub<QuotaHolder> {
  return location.holders.getByName(holderName(keyId, location.name));
}

async function askHolder(
  location: RequestLocation,
  keyId: string,
  ask: (holder: DurableObjectStub<QuotaHolder>) => Promise<HolderAuthentication>,
): Promise<LocationAuthentication> {
  let said: HolderAuthentication;
  try {
    said = await ask(holderIn(location, keyId));
  } catch (err) {
    logFailure("warn", "location holder unreachable; reading the key from D1", err, { keyId });
    return { outcome: "unread" };
  }
  if (said.outcome !== "found") return said;
  const { match, answer, copyAgeMs = 0 } = said;
  const admission: AdmitResult | null = answer?.reached
    ? { reached: true, decision: answer.decision, afterResponse: null }
    : answer;
  return { outcome: "found", match, admission, copyAgeMs };
}

/** Authenticates a secret of key `keyId` at the key's holder in `location`, deciding nothing. */
export function authenticateInLocation(
  location: RequestLocation,
  keyId: string,
  hash: string,
): Promise<LocationAuthentication> {
  return askHolder(location, keyId, (holder) => holder.authenticate(keyId, hash));
}

/** As `authenticateInLocation`, and the holder decides the request in the same hop. */
export function authenticateAndAdmitInLocation(
  location: RequestLocation,
  keyId: string,
  hash: string,
  admissionId: string | null = null,
): Promise<LocationAuthentication> {
  return askHolder(location, keyId, (holder) =>
    holder.authenticateAndAdmit(keyId, hash, admissionId),
  );
}

/** An error that says why a location holder had no decision (`overloaded`: read by `isOverloaded`). */
export class HolderWithoutDecision extends Error {
  readonly overloaded: boolean;

  constructor(readonly why: NoDecision) {
    super(`the key's quota object is ${why.overloaded ? "overloaded" : "unreachable"}`);
    this.overloaded = why.overloaded;
  }
}

/**
 * A request decided by the key's holder in `location` (a call for a lease too: one tier holds the
 * location's permits). Null: not reached; throws HolderWithoutDecision if it could not decide.
 */
export async function admitInLocationOrThrow(
  location: RequestLocation,
  keyId: string,
  region: Region | null,
  policy: Policy,
  request: LeaseRequest,
): Promise<Admission | null> {
  let answer: HolderAnswer;
  try {
    if (request.want > 0 || request.returning.length > 0)
      return await holderIn(location, keyId).admitForIsolate(keyId, policy, request, region);
    // Then asked of the key's object with the same admission id: decided once either way.
    answer = await callWithOneRetry(
      () => holderIn(location, keyId),
      async (holder): Promise<HolderAnswer> =>
        holder.admit(keyId, policy, region, request.admissionId ?? null),
    );
  } catch (err) {
    logFailure("warn", "location holder unreachable; asking the key's object", err, { keyId });
    return null;
  }
  if (answer.reached) return { ...answer.decision, lease: null };
  throw new HolderWithoutDecision(answer);
}

/** Hands the stock of the key's holder in `location` back to the key's object; never throws. */
export async function handBackLocationStock(
  location: RequestLocation,
  keyId: string,
): Promise<void> {
  await holderIn(location, keyId)
    .giveBack(keyId)
    .catch((err: unknown) =>
      logFailure("warn", "could not hand a location holder's stock back", err, { keyId }),
    );
}
