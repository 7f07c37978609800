// Renders a reference page (/docs, /admin/docs) from the document its #app element names, with
// the Scalar bundle served next to this file (public/docs/scalar.js, copied from the pinned
// @scalar/api-reference by scripts/docs-assets.mjs). Nothing is loaded from another origin: no
// fonts, no telemetry, no proxy, no agent, no MCP button; the page's Content-Security-Policy would
// refuse it anyway. The document's security scheme is preselected, so "Test request" has a field
// for the key (or the admin token) and sends it as Authorization: Bearer.
const app = document.getElementById("app");
Scalar.createApiReference("#app", {
  url: app.dataset.document,
  withDefaultFonts: false,
  telemetry: false,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
  defaultOpenAllTags: true,
  proxyUrl: "",
  hideClientButton: false,
  authentication: { preferredSecurityScheme: app.dataset.securityScheme },
  // Only the code samples the document gives (curl and the client), not generic languages.
  hiddenClients: true,
});
