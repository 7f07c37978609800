import type { MiddlewareHandler } from "hono";
import { clock } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { DEPRECATION_VALUES, SUNSET_AT } from "../schemas/deprecation";

/** Marks every response of a deprecated operation, its 401s and its 410 included. */
export const deprecated: MiddlewareHandler = async (c, next) => {
  await next();
  for (const [name, value] of Object.entries(DEPRECATION_VALUES)) c.res.headers.set(name, value);
};

/**
 * 410 from the operation's sunset on. It runs after authentication and the quota, like every
 * other /v1 answer: the request is counted and the answer carries the key's rate-limit headers.
 */
export const removedAfterSunset: MiddlewareHandler = async (_c, next) => {
  if (clock.now() >= SUNSET_AT) {
    const message =
      "GET /v1/pets/{petId} was removed on 5 December 2030; use GET /v1/pets with a status filter.";
    throw new ApiError("endpoint_removed", message, DEPRECATION_VALUES);
  }
  await next();
};
