import type { Context } from "hono";

/**
 * The home page holds links and text, and loads only the console's stylesheet and icon (same
 * origin, static assets): no script.
 */
const HOME_CSP =
  "default-src 'none'; img-src 'self'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** A surface the home page links to: where, what it is called, what it is for. */
type Surface = readonly [href: string, name: string, what: string];

const FOR_CONSUMERS: readonly Surface[] = [
  ["/docs", "API reference", "Every operation of /v1, with examples."],
  ["/v1/openapi.json", "OpenAPI document", "The contract, for code generators."],
];

const FOR_OPERATORS: readonly Surface[] = [
  ["/admin/keys", "Keys", "Issue, find and manage API keys."],
  ["/admin/usage", "Usage", "Every key's totals of a day, for invoicing."],
  ["/admin/audit", "Audit trail", "Who changed which key, and when."],
  ["/admin/webhooks", "Webhooks", "Signed usage alerts and key events, sent to your URLs."],
  ["/admin/docs", "Operator API reference", "Every operation of /admin/v1, with examples."],
];

const surfaceList = (surfaces: readonly Surface[]): string =>
  `<ul class="surfaces">
${surfaces
  .map(
    ([href, name, what]) =>
      `<li><a class="card" href="${href}"><strong>${name}</strong><span class="surface-what">${what}</span></a></li>`,
  )
  .join("\n")}
</ul>`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Animal Store API</title>
<link rel="icon" href="/admin/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/admin/console.css">
</head>
<body>
<main class="home">
<header>
<h1>Animal Store API</h1>
<p class="lead">An HTTP/JSON API for an animal store. Every request to <code>/v1</code> needs an
API key: <code>Authorization: Bearer pet_…</code>.</p>
</header>
<section class="view">
<h2>Use the API</h2>
${surfaceList(FOR_CONSUMERS)}
<p class="hint">With a key: <code>GET /v1/pets</code> lists the animals; <code>GET /v1/usage</code>
shows the key's own quota and usage without spending a request.</p>
</section>
<section class="view">
<h2>Operate it: the console</h2>
${surfaceList(FOR_OPERATORS)}
<p class="hint">The console asks for an admin token.</p>
</section>
</main>
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
