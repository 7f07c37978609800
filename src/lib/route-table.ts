/**
 * The facts middleware needs about each route, written once in routes/table.ts and passed to the
 * middleware that needs them (CORS, quota enforcement, the API response headers), which sits to
 * the left of the routes and cannot import them.
 */

/** The methods a route declares; HEAD comes with GET (Hono answers it from the GET handler). */
export type RouteMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** What a method does: only reads, or may change stored data. */
export type MethodEffect = "read" | "write";

/**
 * Who a route is for, which decides the middleware around it:
 * - `public`: the /v1 API, which a browser on the CORS_ORIGINS may call, with the API's
 *   response headers (a successful read may be kept by the caller's own cache);
 * - `operator`: the operator API, never cross-origin, its answers never stored;
 * - `page`: a page or file that sends its own headers (the API reference, the console).
 */
export type RouteAudience = "public" | "operator" | "page";

export interface Route {
  /** As Hono writes it: `/v1/pets/:petId` (a parameter is one path segment). */
  readonly path: string;
  readonly methods: Readonly<Partial<Record<RouteMethod, MethodEffect>>>;
  readonly audience: RouteAudience;
  /**
   * A public route answered without a key and outside every quota (the OpenAPI document): its
   * answers carry no rate-limit headers. Every other /v1 answer carries them.
   */
  readonly outsideQuota?: true;
}

/** A route and the pattern that recognises its path in `c.req.path`. */
interface CompiledRoute {
  route: Route;
  pattern: RegExp;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** `/v1/pets/:petId` → /^\/v1\/pets\/[^/]+$/ */
function patternOf(path: string): RegExp {
  const segments = path.split("/").map((s) => (s.startsWith(":") ? "[^/]+" : escapeRegExp(s)));
  return new RegExp(`^${segments.join("/")}$`);
}

/** The routes, looked up by the path of a request (before Hono has routed it). */
export class RouteTable {
  readonly routes: readonly Route[];
  readonly #compiled: CompiledRoute[];
  // The last lookup: every middleware that asks (CORS, timing, quota, the response headers) asks
  // about the same request's path, so one request matches the patterns once, not at each ask.
  #last: { path: string; route: Route | undefined } = { path: "", route: undefined };

  constructor(routes: readonly Route[]) {
    this.routes = routes;
    this.#compiled = routes.map((route) => ({ route, pattern: patternOf(route.path) }));
  }

  /** The route whose path matches `path`, if any. */
  find(path: string): Route | undefined {
    if (path === this.#last.path) return this.#last.route;
    const route = this.#compiled.find(({ pattern }) => pattern.test(path))?.route;
    this.#last = { path, route };
    return route;
  }

  /** The methods of `route` as HTTP sees them: each declared one, and HEAD with GET. */
  static methodsOf(route: Route): string[] {
    const declared = Object.keys(route.methods);
    return declared.flatMap((m) => (m === "GET" ? ["GET", "HEAD"] : [m]));
  }

  /** What `method` does on the route at `path`; undefined for no route, or no such method. */
  effectOf(method: string, path: string): MethodEffect | undefined {
    const methods = this.find(path)?.methods;
    if (!methods) return undefined;
    return methods[(method === "HEAD" ? "GET" : method) as RouteMethod];
  }
}
