import { type Route, RouteTable } from "../lib/route-table";

/**
 * Every route of the Worker, with its methods (a read changes nothing stored) and who it is for.
 * The middleware that must know a route before Hono routes the request (CORS, quota enforcement,
 * the API response headers) reads it from here; test/routes.table.test.ts checks it against the
 * routes the app registers, so a route added to one and not the other fails.
 */
const ROUTES: readonly Route[] = [
  // The public API (/v1).
  { path: "/v1/openapi.json", methods: { GET: "read" }, audience: "public", outsideQuota: true },
  { path: "/v1/usage", methods: { GET: "read" }, audience: "public" },
  { path: "/v1/pets", methods: { GET: "read", POST: "write" }, audience: "public" },
  { path: "/v1/pets/:petId", methods: { GET: "read" }, audience: "public" },
  // The operator API (/admin/v1).
  { path: "/admin/v1/openapi.json", methods: { GET: "read" }, audience: "operator" },
  { path: "/admin/v1/keys", methods: { GET: "read", POST: "write" }, audience: "operator" },
  {
    path: "/admin/v1/keys/:id",
    methods: { GET: "read", PATCH: "write", DELETE: "write" },
    audience: "operator",
  },
  { path: "/admin/v1/keys/:id/unban", methods: { POST: "write" }, audience: "operator" },
  { path: "/admin/v1/keys/:id/roll", methods: { POST: "write" }, audience: "operator" },
  { path: "/admin/v1/keys/:id/usage", methods: { GET: "read" }, audience: "operator" },
  { path: "/admin/v1/usage", methods: { GET: "read" }, audience: "operator" },
  { path: "/admin/v1/audit", methods: { GET: "read" }, audience: "operator" },
  { path: "/admin/v1/whoami", methods: { GET: "read" }, audience: "operator" },
  { path: "/admin/v1/webhooks", methods: { GET: "read", POST: "write" }, audience: "operator" },
  {
    path: "/admin/v1/webhooks/:id",
    methods: { GET: "read", PATCH: "write", DELETE: "write" },
    audience: "operator",
  },
  { path: "/admin/v1/webhooks/:id/roll-secret", methods: { POST: "write" }, audience: "operator" },
  { path: "/admin/v1/webhooks/:id/test", methods: { POST: "write" }, audience: "operator" },
  { path: "/admin/v1/webhooks/:id/deliveries", methods: { GET: "read" }, audience: "operator" },
  {
    path: "/admin/v1/webhooks/:id/deliveries/:deliveryId/resend",
    methods: { POST: "write" },
    audience: "operator",
  },
  // Pages, which send their own headers: the API reference and the operator console (their
  // scripts and styles are static assets from public/, not routes of the Worker).
  { path: "/", methods: { GET: "read" }, audience: "page" },
  { path: "/docs", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/docs", methods: { GET: "read" }, audience: "page" },
  { path: "/admin", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/keys", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/keys/new", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/keys/:id", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/usage", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/audit", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/webhooks", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/webhooks/new", methods: { GET: "read" }, audience: "page" },
  { path: "/admin/webhooks/:id", methods: { GET: "read" }, audience: "page" },
];

export const routeTable = new RouteTable(ROUTES);
