import { type Context, Hono } from "hono";
import { readBuiltAssetOrThrow } from "../../lib/built-assets";
import type { BaseEnv } from "../../lib/hono-env";
import { KEY_ID_PATTERN } from "../../schemas/keys";
import { WEBHOOK_ENDPOINT_ID_PATTERN } from "../../schemas/webhooks";

/**
 * Only this origin may serve anything to the page: no inline script or style, no other host
 * (no CDN at run time), no framing, no form posts elsewhere. public/_headers sends the same
 * headers with the page's static files (checked by e2e/console.browser.test.mjs).
 */
const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SECURITY_HEADERS = {
  "Content-Security-Policy": CONSOLE_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
  // The page and its script change with each deploy; they hold no data, but never a stale mix.
  "Cache-Control": "no-cache",
};

/**
 * Where the console's page is among the static assets, by the URL they serve it at: the build
 * renders it (page.tsx, with Hono's JSX) into public/admin/console-page.html
 * (scripts/lib/console-page.mjs), so neither the page nor the JSX renderer is in the Worker's
 * bundle. It is under /admin/*, which only the Worker answers: nobody else can fetch it there.
 */
export const CONSOLE_PAGE_ASSET = "/admin/console-page";

/** The page's text, read once per isolate (a failed read is retried by the next request). */
let page: Promise<string> | undefined;

/** Serves the console's page: the same document for each of its URLs. */
async function consolePage(c: Context<BaseEnv>) {
  if (!page) {
    page = readBuiltAssetOrThrow(c.env.ASSETS, CONSOLE_PAGE_ASSET);
    page.catch(() => {
      page = undefined;
    });
  }
  return c.html(await page, 200, SECURITY_HEADERS);
}

/**
 * The operator console's page, at each URL of a view: /admin (the key list), /admin/keys (with
 * its filters in the query string), /admin/keys/new, /admin/keys/{id}, /admin/usage,
 * /admin/audit, /admin/webhooks, /admin/webhooks/new and /admin/webhooks/{id}. Its script picks the view from the URL. Its script, styles and icon
 * (/admin/console.js, /admin/console.css, /admin/favicon.svg) are static assets from
 * public/admin/, served from this origin without running the Worker (wrangler.toml,
 * run_worker_first), so they do not weigh on the Worker's bundle. All of it is public (none of it
 * holds data); every call the page makes goes to the admin API with the operator's token.
 */
export const consolePages = new Hono<BaseEnv>()
  .get("/", consolePage)
  .get("/keys", consolePage)
  .get("/keys/new", consolePage)
  // A key's page only for what can be a key's id; anything else under /admin/keys/ is no page.
  .get("/keys/:id", (c) => (KEY_ID_PATTERN.test(c.req.param("id")) ? consolePage(c) : c.notFound()))
  .get("/usage", consolePage)
  .get("/audit", consolePage)
  .get("/webhooks", consolePage)
  .get("/webhooks/new", consolePage)
  .get("/webhooks/:id", (c) =>
    WEBHOOK_ENDPOINT_ID_PATTERN.test(c.req.param("id")) ? consolePage(c) : c.notFound(),
  );
