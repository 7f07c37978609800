import type { Context } from "hono";

/**
 * GET /docs and GET /admin/docs: the references of the public and the operator API. The pages only
 * name same-origin scripts (Workers Static Assets from public/docs: the pinned Scalar bundle and
 * init.js), which render the document the page names (/v1/openapi.json, /admin/v1/openapi.json)
 * with its security scheme preselected. Neither page needs a credential to read: the key or
 * token is only asked for to try a request.
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

/** What differs between the two reference pages. */
interface Reference {
  title: string;
  document: string;
  /** The document's security scheme the page preselects, with a field for its credential. */
  securityScheme: string;
}

const referencePage = ({ title, document, securityScheme }: Reference) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" href="/admin/favicon.svg">
</head>
<body>
<noscript>The API reference needs JavaScript. The OpenAPI document is at <a href="${document}">${document}</a>.</noscript>
<div id="app" data-document="${document}" data-security-scheme="${securityScheme}"></div>
<script src="/docs/scalar.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

const PUBLIC_PAGE = referencePage({
  title: "Animal Store API reference",
  document: "/v1/openapi.json",
  securityScheme: "bearerAuth",
});

const ADMIN_PAGE = referencePage({
  title: "Animal Store operator API reference",
  document: "/admin/v1/openapi.json",
  securityScheme: "adminToken",
});

const PAGE_HEADERS = {
  "Content-Security-Policy": DOCS_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "public, max-age=300",
};

export function docsPage(c: Context) {
  return c.html(PUBLIC_PAGE, 200, PAGE_HEADERS);
}

/** GET /admin/docs: the operator API's reference; public, like its document (no data in it). */
export function adminDocsPage(c: Context) {
  return c.html(ADMIN_PAGE, 200, PAGE_HEADERS);
}
