import { Hono } from "hono";
import type { BaseEnv } from "../../lib/hono-env";
import script from "./console.client.js";
import styles from "./console.css.txt";
import { renderConsolePage } from "./page";

/**
 * Only this origin may serve anything to the page: no inline script or style, no other host
 * (no CDN at run time), no framing, no form posts elsewhere.
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

// A paw-less square in the accent colour: the browser asks for an icon either way.
const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2563eb"/></svg>';

let page: string | undefined;

/**
 * The operator console at /admin: one page, its script and its styles, all from this Worker.
 * They are public (they hold no data); every call the page makes goes to the admin API with
 * the operator's token.
 */
export const consolePages = new Hono<BaseEnv>()
  .get("/", (c) => {
    page ??= renderConsolePage();
    return c.html(page, 200, SECURITY_HEADERS);
  })
  .get("/console.js", (c) =>
    c.body(script, 200, { ...SECURITY_HEADERS, "Content-Type": "text/javascript; charset=utf-8" }),
  )
  .get("/console.css", (c) =>
    c.body(styles, 200, { ...SECURITY_HEADERS, "Content-Type": "text/css; charset=utf-8" }),
  )
  .get("/favicon.svg", (c) =>
    c.body(FAVICON, 200, { ...SECURITY_HEADERS, "Content-Type": "image/svg+xml" }),
  );
