/** getPet was deprecated when v1 shipped and is removed at this instant (spec: 5 December 2030). */
const DEPRECATED_AT = Date.UTC(2026, 10, 22);
export const SUNSET_AT = Date.UTC(2030, 11, 5);

/** The headers of every getPet response (and of its 410); the OpenAPI document shows these values. */
export const DEPRECATION_VALUES = {
  Deprecation: `@${DEPRECATED_AT / 1000}`, // RFC 9745: a structured-field date
  Sunset: new Date(SUNSET_AT).toUTCString(), // RFC 8594: an HTTP-date
  Link: '</v1/pets>; rel="successor-version"',
};
