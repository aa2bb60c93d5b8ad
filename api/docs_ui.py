"""The API's documentation page, /docs (Swagger UI), served from this origin only.

Swagger UI's script and style come from the installed ``fastapi-offline`` package (no CDN, no
floating version: the page works offline), and a script file of ours starts it, so the page's
Content-Security-Policy allows only this origin's scripts and nothing inline: a script from
elsewhere on the console's origin could read its CSRF token. There is no /redoc: ReDoc's bundle
loads its logo from its vendor's CDN.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
UI_ASSETS = Path(fastapi_offline.__file__).parent / "static"
OWN_ASSETS = Path(__file__).parent / "docs_static"
# Swagger UI sets style attributes at run time; scripts stay this origin's own files.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - Swagger UI</title>
<link rel="icon" href="{assets}/ui/favicon.png">
<link rel="stylesheet" href="{assets}/ui/swagger-ui.css">
</head>
<body data-openapi="{openapi}">
<div id="swagger-ui"></div>
<script src="{assets}/ui/swagger-ui-bundle.js"></script>
<script src="{assets}/own/swagger-init.js"></script>
</body>
</html>
"""


def install(app: FastAPI, *, title: str, openapi_url: str) -> None:
    """Serve /docs (excluded from the OpenAPI document) and its assets under ``/docs/assets``;
    the FastAPI app must be made with ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_PATH + "/ui", StaticFiles(directory=UI_ASSETS), name="docs-ui-assets")
    app.mount(ASSETS_PATH + "/own", StaticFiles(directory=OWN_ASSETS), name="docs-own-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        html = _PAGE.format(
            title=escape(title),
            assets=escape(root + ASSETS_PATH),
            openapi=escape(root + openapi_url),
        )
        return HTMLResponse(html, headers=HEADERS)
