import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { clock } from "../clock";
import { ApiError } from "../errors";

/** getPet was deprecated when v1 shipped and is removed at this instant (spec: 5 December 2030). */
const DEPRECATED_AT = Date.UTC(2026, 10, 22);
export const SUNSET_AT = Date.UTC(2030, 11, 5);

/** The headers of every getPet response (and of its 410); the OpenAPI document shows these values. */
export const DEPRECATION_VALUES = {
  Deprecation: `@${DEPRECATED_AT / 1000}`, // RFC 9745: a structured-field date
  Sunset: new Date(SUNSET_AT).toUTCString(), // RFC 8594: an HTTP-date
  Link: '</v1/pets>; rel="successor-version"',
};

/** Marks every response of a deprecated operation, and answers 410 from its sunset on. */
export const deprecated: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (clock.now() >= SUNSET_AT) {
    throw new ApiError("endpoint_removed", "GET /v1/pets/{petId} was removed on 5 December 2030; use GET /v1/pets with a status filter.", DEPRECATION_VALUES);
  }
  await next();
  for (const [name, value] of Object.entries(DEPRECATION_VALUES)) c.res.headers.set(name, value);
};
