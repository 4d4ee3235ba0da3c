"""The interactive API docs at ``/docs``, served with Swagger UI from the package.

FastAPI's own ``/docs`` loads Swagger UI from a CDN, so a server without a way
out showed a blank page. The assets in ``static_docs/`` (Swagger UI's release,
see its README there) ship inside the wheel; nothing is fetched at run time.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(__file__).parent / "static_docs"
ASSETS_URL = "/docs/assets"


#: Swagger UI's own colours, darkened until their text reads at 4.5:1 (WCAG AA): white on
#: its method badges, its version badges, its links and buttons were 2:1 to 3.8:1.
CONTRAST = """<style>
.swagger-ui .opblock.opblock-get .opblock-summary-method { background: #1f6aa5; }
.swagger-ui .opblock.opblock-post .opblock-summary-method { background: #1d7048; }
.swagger-ui .opblock.opblock-put .opblock-summary-method { background: #8f4c05; }
.swagger-ui .opblock.opblock-delete .opblock-summary-method { background: #b51f1f; }
.swagger-ui .opblock.opblock-patch .opblock-summary-method { background: #116b59; }
.swagger-ui .opblock.opblock-head .opblock-summary-method { background: #6b2fa8; }
.swagger-ui .opblock.opblock-options .opblock-summary-method { background: #1c4f7c; }
.swagger-ui .info .title small { background: #50565f; }
.swagger-ui .info .title small.version-stamp { background: #3d5a00; }
.swagger-ui .info .url, .swagger-ui .info a { color: #1a5592; }
.swagger-ui .btn.authorize { color: #1d7048; border-color: #1d7048; }
.swagger-ui .btn.authorize svg { fill: #1d7048; }
.swagger-ui .json-schema-2020-12-expand-deep-button { color: #4a4a4a; }
</style>
"""


def accessible(html: str) -> str:
    """FastAPI's Swagger UI page made readable to all: ``lang="en"`` on its root (screen
    readers otherwise guess the language; axe's ``html-has-lang``) and :data:`CONTRAST`."""
    html = html.replace("<html>", '<html lang="en">', 1)
    return html.replace("</head>", CONTRAST + "</head>", 1)


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets under ``/docs/assets`` from this package.

    The app must be built with ``docs_url=None`` and ``redoc_url=None``, so the
    CDN-backed pages FastAPI would add are not there.
    """
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title} API"

    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
            # No badge from the public validator: it is an image fetched from elsewhere.
            # No deep links: each is a link inside the operation's button, which screen
            # readers cannot reach (axe's nested-interactive).
            swagger_ui_parameters={"validatorUrl": None, "deepLinking": False},
        )
        return HTMLResponse(accessible(bytes(page.body).decode()))

    app.add_api_route("/docs", docs, include_in_schema=False, response_class=HTMLResponse)
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
