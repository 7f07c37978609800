import type { Context } from "hono";

/**
 * GET /docs: the API reference. The page only names same-origin scripts (Workers Static Assets
 * from public/docs: the pinned Scalar bundle and init.js), which render /v1/openapi.json.
 *
 * The Content-Security-Policy allows nothing from another origin. Scalar sets styles at run time,
 * hence 'unsafe-inline' for styles only; scripts must come from this origin, and nothing else
 * (frames, forms, plugins, base URL changes, being framed) is allowed at all.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Animal Store API reference</title>
<link rel="icon" href="/admin/favicon.svg">
</head>
<body>
<noscript>The API reference needs JavaScript. The OpenAPI document is at <a href="/v1/openapi.json">/v1/openapi.json</a>.</noscript>
<div id="app"></div>
<script src="/docs/scalar.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

export function docsPage(c: Context) {
  return c.html(PAGE, 200, {
    "Content-Security-Policy": DOCS_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "public, max-age=300",
  });
}
