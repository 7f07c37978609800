// The pets routes' paths as middleware sees them (`c.req.path`, before Hono has routed the
// request). routes/pets declares them as "/pets" and "/pets/{petId}" mounted under /v1, but
// middleware sits to the left of routes and cannot import them, so the patterns are written once
// here for the middleware that has to recognise them: CORS (the routes a browser on another
// origin may call, with their methods) and quota enforcement (the reads whose handler may run
// alongside the limiter call).

/** listPets and createPet: `/v1/pets`. */
export const PETS_PATH = /^\/v1\/pets$/;

/** getPet: `/v1/pets/{petId}` (any one segment; the route validates the id). */
export const PET_PATH = /^\/v1\/pets\/[^/]+$/;
