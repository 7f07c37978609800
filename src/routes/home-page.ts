import type { Context } from "hono";

/** The home page holds links and text, and loads only its icon (the console's, same origin). */
const HOME_CSP =
  "default-src 'none'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Animal Store API</title>
<link rel="icon" href="/admin/favicon.svg" type="image/svg+xml">
</head>
<body>
<h1>Animal Store API</h1>
<p>An HTTP/JSON API for an animal store. Every request to <code>/v1</code> needs an API key:
<code>Authorization: Bearer pet_…</code>.</p>
<ul>
<li><a href="/docs">API reference</a>: every operation, with examples.</li>
<li><a href="/v1/openapi.json">OpenAPI document</a>: the contract, for code generators.</li>
<li><a href="/admin">Operator console</a>: issue and manage keys, usage and the audit trail
(needs an admin token).</li>
</ul>
<p>With a key: <code>GET /v1/pets</code> lists the animals; <code>GET /v1/usage</code> shows the
key's own quota and usage without spending a request.</p>
</body>
</html>
`;

/** GET /: where to go from here (the reference, the OpenAPI document, the console). */
export function homePage(c: Context) {
  return c.html(PAGE, 200, {
    "Content-Security-Policy": HOME_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "public, max-age=300",
  });
}
