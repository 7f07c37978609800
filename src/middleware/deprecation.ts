import type { MiddlewareHandler } from "hono";
import { clock } from "../lib/clock";
import { ApiError } from "../lib/errors";
import { DEPRECATION_VALUES, SUNSET_AT } from "../schemas/deprecation";

/** Marks every response of a deprecated operation, and answers 410 from its sunset on. */
export const deprecated: MiddlewareHandler = async (c, next) => {
  if (clock.now() >= SUNSET_AT) {
    const message =
      "GET /v1/pets/{petId} was removed on 5 December 2030; use GET /v1/pets with a status filter.";
    throw new ApiError("endpoint_removed", message, DEPRECATION_VALUES);
  }
  await next();
  for (const [name, value] of Object.entries(DEPRECATION_VALUES)) c.res.headers.set(name, value);
};
