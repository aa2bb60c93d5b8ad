// Starts Swagger UI on /docs from this origin's own files (no inline script: the page's
// Content-Security-Policy allows only scripts served by the API itself).
window.ui = SwaggerUIBundle({
  url: document.body.dataset.openapi,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
