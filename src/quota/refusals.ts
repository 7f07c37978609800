import { ApiError } from "../lib/errors";
import type { Refusal } from "./windows";

const REFUSALS = {
  rate_limited:
    "Per-minute rate limit exceeded; wait for Retry-After, then back off exponentially.",
  quota_exceeded:
    "Daily quota exceeded; it resets at 00:00 UTC (see Retry-After). Upgrade the plan for more.",
  key_banned:
    "The API key is temporarily banned for repeated requests after 429 responses; wait for Retry-After.",
} as const;

/** The error a refused request is answered with: the refusal's code, what to do, `headers`. */
export function refusalError(outcome: Refusal, headers: Record<string, string>): ApiError {
  return new ApiError(outcome, REFUSALS[outcome], headers);
}
