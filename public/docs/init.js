// Renders /docs from the Worker's own OpenAPI document with the Scalar bundle served next to this
// file (public/docs/scalar.js, copied from the pinned @scalar/api-reference by
// scripts/docs-assets.mjs). Nothing is loaded from another origin: no fonts, no telemetry, no
// proxy, no agent, no MCP button; the page's Content-Security-Policy would refuse it anyway.
Scalar.createApiReference("#app", {
  url: "/v1/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
  defaultOpenAllTags: true,
  proxyUrl: "",
  hideClientButton: false,
});
